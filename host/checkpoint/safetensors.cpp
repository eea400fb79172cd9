#include "checkpoint/safetensors.hpp"

#include <megahost/error.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <thread>

#include "checkpoint/json_limits.hpp"

namespace mh::safetensors {
namespace {

// The reference implementation refuses headers over 100 MB.
constexpr uint64_t kMaxHeader = 100'000'000;

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(MH_INVALID_ARGUMENT, path + ": not a valid safetensors file: " + what);
}

uint64_t read_u64_le(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | uint64_t(p[i]);
  return v;
}

// Fills `out` from offset `at` of `fd`; a file that ends first was cut
// while it was read.
void read_at(int fd, std::span<std::byte> out, uint64_t at, const std::string& path) {
  while (!out.empty()) {
    const ssize_t n = ::pread(fd, out.data(), out.size(), off_t(at));
    if (n < 0 && errno == EINTR) continue;
    require(n > 0, "cannot read " + path + " at byte " + std::to_string(at) + ": " +
                       (n == 0 ? std::string("the file ends there (truncated while it was read)") : std::strerror(errno)),
            MH_UNAVAILABLE);
    out = out.subspan(size_t(n));
    at += uint64_t(n);
  }
}

TensorInfo parse_tensor(const std::string& key, const nlohmann::json& j, uint64_t data_size, const std::string& path) {
  const std::string where = "tensor '" + key + "': ";
  if (!j.is_object() || !j.contains("dtype") || !j.contains("shape") || !j.contains("data_offsets"))
    bad(path, where + "needs dtype, shape and data_offsets");
  const auto &dtype = j["dtype"], &shape = j["shape"], &offsets = j["data_offsets"];
  if (!dtype.is_string() || dtype_bytes(dtype.get<std::string>()) == 0) bad(path, where + "unknown dtype");
  if (!shape.is_array() || !offsets.is_array() || offsets.size() != 2) bad(path, where + "malformed shape or data_offsets");
  TensorInfo t{dtype.get<std::string>(), {}, 0, 0};
  uint64_t bytes = dtype_bytes(t.dtype);
  for (const auto& d : shape) {
    if (!d.is_number_unsigned()) bad(path, where + "shape entries must be non-negative integers");
    t.shape.push_back(int64_t(d.get<uint64_t>()));
    if (d.get<uint64_t>() > uint64_t(INT64_MAX) || __builtin_mul_overflow(bytes, d.get<uint64_t>(), &bytes))
      bad(path, where + "shape too large");
  }
  if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) bad(path, where + "malformed data_offsets");
  t.begin = offsets[0].get<uint64_t>();
  t.end = offsets[1].get<uint64_t>();
  if (t.begin > t.end || t.end > data_size) bad(path, where + "data_offsets outside the file");
  if (t.end - t.begin != bytes) bad(path, where + "data_offsets do not match its shape and dtype");
  return t;
}

// The tensors' byte ranges must tile the data section exactly.
void check_tiling(const Header& h, uint64_t data_size, const std::string& path) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [key, t] : h.tensors) ranges.emplace_back(t.begin, t.end);
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin != at) bad(path, begin < at ? "tensors overlap" : "a gap between tensors");
    at = end;
  }
  if (at != data_size) bad(path, "the data section is " + std::to_string(data_size) + " bytes but the tensors cover " +
                                     std::to_string(at) + " (truncated or padded)");
}

// In pieces of 1 MiB, each hashed just before it is written while it is in
// the cache: measured here, one write of a gigabyte runs at a third of the
// disk's speed and 1 MiB pieces at all of it.
constexpr size_t kPiece = size_t(1) << 20;

void write_all(int fd, std::span<const std::byte> bytes, XXH3_state_t* hash, const std::string& path) {
  while (!bytes.empty()) {
    std::span<const std::byte> piece = bytes.first(std::min(bytes.size(), kPiece));
    XXH3_64bits_update(hash, piece.data(), piece.size());
    while (!piece.empty()) {
      ssize_t n = ::write(fd, piece.data(), piece.size());
      if (n < 0 && errno == EINTR) continue;
      require(n > 0, "cannot write " + path + ": " + std::strerror(errno), MH_UNAVAILABLE);
      piece = piece.subspan(size_t(n));
      bytes = bytes.subspan(size_t(n));
    }
  }
}

std::string header_text(const std::vector<Entry>& entries, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t at = 0;
  for (const Entry& e : entries) {
    uint64_t bytes = dtype_bytes(e.dtype);
    for (int64_t d : e.shape) bytes *= uint64_t(d);
    header[e.key] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  std::string text = header.dump();
  // Padded with spaces so the data starts 8-byte aligned, as the reference does.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

uint64_t dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, uint64_t> kSizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
      {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},  {"BOOL", 1}};
  auto it = kSizes.find(dtype);
  return it == kSizes.end() ? 0 : it->second;
}

Header parse_header(std::span<const std::byte> file, const std::string& path) {
  return parse_header(file, file.size(), path);
}

Header parse_header(std::span<const std::byte> head, uint64_t file_size, const std::string& path) {
  if (file_size < 8 || head.size() < 8) bad(path, "shorter than its 8-byte header length");
  const uint64_t n = read_u64_le(head.data());
  if (n > kMaxHeader || n > file_size - 8) bad(path, "header length " + std::to_string(n) + " exceeds the file");
  if (n > head.size() - 8) bad(path, "the header ends after the bytes read of it");
  const std::string_view text(reinterpret_cast<const char*>(head.data() + 8), size_t(n));
  const nlohmann::json j = parse_json_limited(text, path, 8);
  if (!j.is_object()) bad(path, "the header is not a JSON object");
  Header h;
  h.data_start = 8 + n;
  const uint64_t data_size = file_size - h.data_start;
  for (const auto& [key, value] : j.items()) {
    if (key != "__metadata__") {
      h.tensors.emplace(key, parse_tensor(key, value, data_size, path));
      continue;
    }
    if (!value.is_object()) bad(path, "__metadata__ is not an object");
    for (const auto& [k, v] : value.items()) {
      if (!v.is_string()) bad(path, "__metadata__ values must be strings");
      h.metadata.emplace(k, v.get<std::string>());
    }
  }
  check_tiling(h, data_size, path);
  return h;
}

Header read_header(int fd, uint64_t file_size, const std::string& path) {
  std::vector<std::byte> head(size_t(std::min<uint64_t>(file_size, 8)));
  read_at(fd, head, 0, path);
  if (head.size() == 8) {
    // At most the limit is read: a longer header is refused by its length.
    head.resize(size_t(8 + std::min({read_u64_le(head.data()), file_size - 8, kMaxHeader})));
    read_at(fd, std::span(head).subspan(8), 8, path);
  }
  return parse_header(head, file_size, path);
}

Written write_file(const std::string& path, const std::vector<Entry>& entries,
                   const std::map<std::string, std::string>& metadata,
                   const std::function<std::span<const std::byte>(size_t)>& data) {
  const std::string header = header_text(entries, metadata);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  require(fd >= 0, "cannot create " + path + ": " + std::strerror(errno), MH_UNAVAILABLE);
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> hash(XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset(hash.get());
  Written w{8 + header.size(), 0};
  try {
    std::byte length[8];
    for (int i = 0; i < 8; ++i) length[i] = std::byte((header.size() >> (8 * i)) & 0xFF);
    write_all(fd, length, hash.get(), path);
    write_all(fd, std::as_bytes(std::span(header)), hash.get(), path);
    for (size_t i = 0; i < entries.size(); ++i) {
      std::span<const std::byte> bytes = data(i);
      write_all(fd, bytes, hash.get(), path);
      w.bytes += bytes.size();
    }
    require(::fsync(fd) == 0, "cannot sync " + path + " to disk: " + std::strerror(errno), MH_UNAVAILABLE);
  } catch (...) {
    ::close(fd);
    throw;
  }
  require(::close(fd) == 0, "cannot close " + path + ": " + std::strerror(errno), MH_UNAVAILABLE);
  w.xxh3 = XXH3_64bits_digest(hash.get());
  return w;
}

uint64_t checksum(std::span<const std::byte> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

uint64_t checksum(const data::MappedFile& file) {
  // Two windows ahead keep the disk busy while one is hashed.
  constexpr size_t kWindow = size_t(64) << 20;
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> hash(XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset(hash.get());
  const std::span<const std::byte> bytes = file.bytes();
  file.will_need(0, 2 * kWindow);
  for (size_t at = 0; at < bytes.size(); at += kWindow) {
    file.will_need(at + 2 * kWindow, kWindow);
    const std::span<const std::byte> window = bytes.subspan(at, std::min(kWindow, bytes.size() - at));
    XXH3_64bits_update(hash.get(), window.data(), window.size());
  }
  return XXH3_64bits_digest(hash.get());
}

namespace {

// 8 MiB per window: each read is one long request to the disk, and a window
// is still in the CPU's cache when it is hashed and copied. Four in flight
// keep the disk busy meanwhile.
constexpr size_t kStreamWindow = size_t(8) << 20;
constexpr size_t kStreamSlots = 4;
// Direct reads want their buffer, offset and length aligned to the
// device's logical block: 4096 covers every common one.
constexpr size_t kDirectAlign = 4096;

struct FreeAligned {
  void operator()(std::byte* p) const { std::free(p); }
};

// The background reader of stream_file: fills slot i % kStreamSlots with
// window i once the caller has handed window i - kStreamSlots on. A window
// the page cache holds (a resume right after a save) is copied from it; any
// other the disk writes straight into the slot (O_DIRECT), without a copy
// through the cache: measured here, that halves the CPU a cold load takes,
// and on a busy machine the CPU is what holds the disk back.
class WindowReader {
 public:
  WindowReader(int fd, uint64_t bytes, const std::string& path)
      : fd_(fd), bytes_(bytes), path_(path), windows_((bytes + kStreamWindow - 1) / kStreamWindow) {
    for (auto& slot : slots_) {
      slot.reset(static_cast<std::byte*>(std::aligned_alloc(kDirectAlign, kStreamWindow)));
      if (!slot) throw std::bad_alloc();
    }
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);  // a hint: larger readahead for cached reads
    // The same open file again, for direct reads; where the file system
    // refuses them (or /proc is missing), every window goes through the cache.
    direct_ = ::open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    // Mapped only to ask which pages are cached (mincore); never read.
    if (bytes_ > 0) {
      void* map = ::mmap(nullptr, size_t(bytes_), PROT_READ, MAP_SHARED, fd_, 0);
      map_ = map == MAP_FAILED ? nullptr : map;
    }
    thread_ = std::thread([this] { run(); });
  }
  ~WindowReader() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    thread_.join();
    if (map_ != nullptr) ::munmap(map_, size_t(bytes_));
    if (direct_ >= 0) ::close(direct_);
  }
  uint64_t windows() const { return windows_; }
  // Window i, once read; throws what the reader hit.
  std::span<const std::byte> wait(uint64_t i) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return read_ > i || error_; });
    if (read_ <= i) std::rethrow_exception(error_);
    return {slots_[i % kStreamSlots].get(), size_t(std::min<uint64_t>(kStreamWindow, bytes_ - i * kStreamWindow))};
  }
  // The caller is done with window i: its slot may be refilled.
  void done(uint64_t i) {
    {
      std::lock_guard lock(mutex_);
      used_ = i + 1;
    }
    changed_.notify_all();
  }

 private:
  // Whether every page of [at, at + length) is in the page cache.
  bool cached(uint64_t at, size_t length) {
    if (map_ == nullptr) return false;
    const size_t page = size_t(::sysconf(_SC_PAGESIZE));
    resident_.resize((length + page - 1) / page);
    if (::mincore(static_cast<std::byte*>(map_) + at, length, resident_.data()) != 0) return false;
    return std::all_of(resident_.begin(), resident_.end(), [](unsigned char r) { return (r & 1) != 0; });
  }

  void fill(uint64_t i) {
    const uint64_t at = i * kStreamWindow;
    const size_t length = size_t(std::min<uint64_t>(kStreamWindow, bytes_ - at));
    std::byte* out = slots_[i % kStreamSlots].get();
    if (direct_ >= 0 && !cached(at, length)) {
      // The last window's length rounded up: a direct read stops at the file's end.
      const size_t aligned = (length + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
      const ssize_t n = ::pread(direct_, out, aligned, off_t(at));
      if (n >= ssize_t(length)) return;
      if (n < 0 && errno == EINVAL) {  // the file system takes no direct reads after all
        ::close(direct_);
        direct_ = -1;
      }
    }
    // Cached, or a direct read cut short: the file's end and errors are read_at's to name.
    read_at(fd_, std::span(out, length), at, path_);
  }

  void run() {
    try {
      for (uint64_t i = 0; i < windows_; ++i) {
        {
          std::unique_lock lock(mutex_);
          changed_.wait(lock, [&] { return stop_ || i < used_ + kStreamSlots; });
          if (stop_) return;
        }
        fill(i);
        {
          std::lock_guard lock(mutex_);
          read_ = i + 1;
        }
        changed_.notify_all();
      }
    } catch (...) {
      {
        std::lock_guard lock(mutex_);
        error_ = std::current_exception();
      }
      changed_.notify_all();
    }
  }

  const int fd_;
  const uint64_t bytes_;
  const std::string& path_;
  const uint64_t windows_;
  int direct_ = -1;
  void* map_ = nullptr;
  std::vector<unsigned char> resident_;
  std::array<std::unique_ptr<std::byte[], FreeAligned>, kStreamSlots> slots_;
  std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t read_ = 0, used_ = 0;  // windows read; windows the caller is done with
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace

uint64_t stream_file(int fd, uint64_t bytes, const std::string& path,
                     const std::function<void(uint64_t at, std::span<const std::byte> window)>& each) {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> hash(XXH3_createState(), &XXH3_freeState);
  XXH3_64bits_reset(hash.get());
  WindowReader reader(fd, bytes, path);
  for (uint64_t i = 0; i < reader.windows(); ++i) {
    const std::span<const std::byte> window = reader.wait(i);
    XXH3_64bits_update(hash.get(), window.data(), window.size());
    each(i * kStreamWindow, window);
    reader.done(i);
  }
  return XXH3_64bits_digest(hash.get());
}

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

File::File(const std::string& path, std::string_view fix) : File(std::make_unique<data::MappedFile>(path, fix)) {}

File::File(std::unique_ptr<const data::MappedFile> map)
    : map_(std::move(map)), header_(parse_header(map_->bytes(), map_->path())) {}

std::span<const std::byte> File::data(const std::string& key) const {
  auto it = header_.tensors.find(key);
  require(it != header_.tensors.end(), path() + ": no tensor '" + key + "' in the file, though the index lists it there",
          MH_NOT_FOUND);
  return map_->bytes().subspan(size_t(header_.data_start + it->second.begin), size_t(it->second.end - it->second.begin));
}

}  // namespace mh::safetensors
