#include "report/tensorboard/event_file.hpp"

#include <megahost/error.hpp>

#include <boost/crc.hpp>
#include <unistd.h>

#include <array>
#include <bit>
#include <chrono>
#include <cstring>
#include <filesystem>

namespace mh::tensorboard {
namespace {

// Protocol buffer wire format: a field is its number and wire type as a
// varint, then a varint, 8 or 4 little-endian bytes, or a length and bytes.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(v & 0x7f | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}

void key(std::string& out, uint32_t field, WireType type) { varint(out, uint64_t(field) << 3 | type); }

template <class T>
void little_endian(std::string& out, T value) {
  static_assert(std::endian::native == std::endian::little, "event files are little-endian");
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

void bytes_field(std::string& out, uint32_t field, const std::string& bytes) {
  key(out, field, kBytes);
  varint(out, bytes.size());
  out += bytes;
}

// tensorflow/core/util/event.proto: Event{wall_time = 1, step = 2,
// file_version = 3, summary = 5}.
std::string event(int64_t step, uint32_t field, const std::string& payload) {
  std::string e;
  key(e, 1, kFixed64);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  little_endian(e, std::chrono::duration<double>(now).count());
  key(e, 2, kVarint);
  varint(e, uint64_t(step));
  bytes_field(e, field, payload);
  return e;
}

// tensorflow/core/framework/summary.proto: Summary{repeated Value value = 1}.
std::string summary(const std::string& value) {
  std::string s;
  bytes_field(s, 1, value);
  return s;
}

// TFRecord's checksum: CRC-32C, rotated and offset so that a CRC of data
// holding CRCs stays well distributed.
uint32_t masked_crc(const char* data, size_t n) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data, n);
  const uint32_t c = crc.checksum();
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string file_name() {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) std::strcpy(host.data(), "localhost");
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return "events.out.tfevents." + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count()) +
         "." + host.data() + "." + std::to_string(getpid());
}

}  // namespace

EventFile::EventFile(const std::string& dir, const std::string& key) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  path_ = (std::filesystem::path(dir) / file_name()).string();
  if (!ec) out_.open(path_, std::ios::binary | std::ios::trunc);
  require(!ec && out_.is_open(), "cannot create the TensorBoard event file '" + path_ + "'" +
                                     (ec ? ": " + ec.message() : std::string()) + "; check " + key);
  record(event(0, 3, "brain.Event:2"));
  flush();
}

void EventFile::scalar(const std::string& tag, int64_t step, double value) {
  std::string v;
  bytes_field(v, 1, tag);  // Value.tag
  key(v, 2, kFixed32);     // Value.simple_value
  little_endian(v, float(value));
  record(event(step, 5, summary(v)));
}

void EventFile::text(const std::string& tag, int64_t step, const std::string& markdown) {
  std::string plugin, metadata, tensor, v;
  bytes_field(plugin, 1, "text");   // PluginData.plugin_name
  bytes_field(metadata, 1, plugin); // SummaryMetadata.plugin_data
  key(tensor, 1, kVarint);          // TensorProto.dtype = DT_STRING
  varint(tensor, 7);
  bytes_field(tensor, 2, "");       // TensorProto.tensor_shape: a scalar
  bytes_field(tensor, 8, markdown); // TensorProto.string_val
  bytes_field(v, 1, tag);
  bytes_field(v, 8, tensor);        // Value.tensor
  bytes_field(v, 9, metadata);      // Value.metadata
  record(event(step, 5, summary(v)));
}

// TFRecord: length (u64), its masked CRC (u32), the data, its masked CRC.
void EventFile::record(const std::string& event) {
  std::string framed;
  little_endian(framed, uint64_t(event.size()));
  little_endian(framed, masked_crc(framed.data(), 8));
  framed += event;
  little_endian(framed, masked_crc(event.data(), event.size()));
  out_.write(framed.data(), std::streamsize(framed.size()));
}

void EventFile::flush() {
  out_.flush();
  require(out_.good(), "writing the TensorBoard event file '" + path_ + "' failed (disk full?)", MH_RESOURCE_EXHAUSTED);
}

}  // namespace mh::tensorboard
