#include "data/byte_level_bpe.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <functional>
#include <mutex>
#include <queue>
#include <tuple>

namespace mh::data {
namespace {

// GPT-2 gives every byte a printable stand-in so that symbols never hold
// whitespace or control characters: the printable Latin-1 bytes ('!'..'~',
// '¡'..'¬', '®'..'ÿ') stand for themselves and the other 68 bytes take the
// code points 256, 257, ... in byte order.
std::array<char32_t, 256> byte_code_points() {
  std::array<char32_t, 256> code_points{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    code_points[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return code_points;
}

std::string utf8(char32_t c) {
  if (c < 0x80) return std::string(1, static_cast<char>(c));
  // Stand-ins are below U+0800, so two bytes always suffice.
  return {static_cast<char>(0xC0 | (c >> 6)), static_cast<char>(0x80 | (c & 0x3F))};
}

size_t utf8_length(unsigned char lead) {
  return lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
}

// A vocabulary entry's symbols back to the bytes they stand for. Characters
// that are no stand-in (only in added special tokens) are kept as UTF-8.
std::string symbols_to_bytes(const std::string& token) {
  static const std::unordered_map<std::string, char> stand_in_to_byte = [] {
    std::unordered_map<std::string, char> m;
    for (int b = 0; b < 256; ++b) m.emplace(byte_symbols()[b], static_cast<char>(b));
    return m;
  }();
  std::string bytes;
  for (size_t i = 0; i < token.size();) {
    const size_t length = std::min(utf8_length(static_cast<unsigned char>(token[i])), token.size() - i);
    std::string character = token.substr(i, length);
    auto it = stand_in_to_byte.find(character);
    bytes += it != stand_in_to_byte.end() ? std::string(1, it->second) : character;
    i += length;
  }
  return bytes;
}

// The code point of one well-formed UTF-8 character.
char32_t decode_utf8(std::string_view c) {
  const auto lead = static_cast<unsigned char>(c[0]);
  if (c.size() == 1) return lead;
  char32_t cp = lead & (0x7F >> c.size());
  for (size_t i = 1; i < c.size(); ++i) cp = cp << 6 | (static_cast<unsigned char>(c[i]) & 0x3F);
  return cp;
}

// Pieces longer than this are merged every time: they are rare, and caching
// them would let one document fill the cache.
constexpr size_t kMaxCachedPiece = 256;

}  // namespace

const std::array<std::string, 256>& byte_symbols() {
  static const std::array<std::string, 256> symbols = [] {
    std::array<std::string, 256> s;
    auto code_points = byte_code_points();
    for (int b = 0; b < 256; ++b) s[b] = utf8(code_points[b]);
    return s;
  }();
  return symbols;
}

// Piece -> ids, in shards with a lock each so that prepare's workers rarely
// wait on one another; a full shard is emptied (text repeats its common
// pieces, which come straight back).
class PieceCache {
 public:
  bool find(std::string_view piece, std::vector<int32_t>& out) {
    Shard& shard = shard_of(piece);
    std::lock_guard lock(shard.mu);
    auto it = shard.map.find(piece);
    if (it == shard.map.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }
  void add(std::string_view piece, std::span<const int32_t> ids) {
    Shard& shard = shard_of(piece);
    std::lock_guard lock(shard.mu);
    if (shard.map.size() >= kShardCapacity) shard.map.clear();
    shard.map.emplace(std::string(piece), std::vector<int32_t>(ids.begin(), ids.end()));
  }

 private:
  static constexpr size_t kShards = 64, kShardCapacity = 4096;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> map;
  };
  Shard& shard_of(std::string_view piece) {
    // The map hashes again; mixing the length in keeps the shard choice
    // independent of the map's bucket choice.
    return shards_[(Hash{}(piece) * 0x9E3779B97F4A7C15ull >> 58) % kShards];
  }
  std::array<Shard, kShards> shards_;
};

std::string byte_fallback_token(unsigned char byte) {
  constexpr char kHex[] = "0123456789ABCDEF";
  return std::string("<0x") + kHex[byte >> 4] + kHex[byte & 15] + ">";
}

ByteLevelBpe::ByteLevelBpe(const std::unordered_map<std::string, int32_t>& vocab,
                           const std::vector<std::pair<std::string, std::string>>& merges,
                           std::string source, bool ignore_merges, BpeAlphabet alphabet, int32_t unk)
    : source_(std::move(source)),
      ignore_merges_(ignore_merges),
      alphabet_(alphabet),
      unk_(unk),
      cache_(std::make_unique<PieceCache>()) {
  const bool bytes = alphabet_ == BpeAlphabet::kBytes;
  token_bytes_.assign(vocab.size(), {});
  for (const auto& [symbol, id] : vocab) {
    token_bytes_.at(static_cast<size_t>(id)) = bytes ? symbols_to_bytes(symbol) : symbol;
    const size_t length = symbol.empty() ? 0 : utf8_length(static_cast<unsigned char>(symbol[0]));
    if (!bytes && length == symbol.size()) character_ids_.emplace(decode_utf8(symbol), id);
  }
  for (int b = 0; b < 256; ++b) {
    auto it = vocab.find(bytes ? byte_symbols()[b] : byte_fallback_token(static_cast<unsigned char>(b)));
    byte_ids_[b] = it == vocab.end() ? -1 : it->second;
  }
  if (ignore_merges_) ids_ = vocab;
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    auto l = vocab.find(left), r = vocab.find(right), m = vocab.find(left + right);
    require(l != vocab.end() && r != vocab.end() && m != vocab.end(),
            source_ + ": merge " + std::to_string(rank + 1) + " '" + left + " " + right +
                "' uses a symbol that is not in the vocabulary (" +
                (l == vocab.end() ? left : r == vocab.end() ? right : left + right) +
                "); the vocabulary and merges do not belong together");
    // A repeated merge takes its last rank, as in `tokenizers` and GPT-2's
    // own encoder (both build a map from the list).
    merges_.insert_or_assign(pair_key(l->second, r->second),
                             Merged{static_cast<int32_t>(rank), m->second});
  }
}

ByteLevelBpe::~ByteLevelBpe() = default;

const std::string& ByteLevelBpe::token_bytes(int32_t id) const {
  static const std::string none;
  return id >= 0 && id < vocab_size() ? token_bytes_[static_cast<size_t>(id)] : none;
}

void ByteLevelBpe::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (piece.size() == 1 || piece.size() > kMaxCachedPiece) return merge(piece, out);
  if (cache_->find(piece, out)) return;
  const size_t before = out.size();
  merge(piece, out);
  cache_->add(piece, std::span<const int32_t>(out).subspan(before));
}

// `tokenizers`' Word::merge_all: a min-queue of (rank, position) over the
// adjacent pairs that have a merge; each pop merges its pair unless an
// earlier merge changed it, and queues the new pairs on either side.
void ByteLevelBpe::merge(std::string_view piece, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    std::string symbols;
    if (alphabet_ == BpeAlphabet::kBytes) {
      for (char c : piece) symbols += byte_symbols()[static_cast<unsigned char>(c)];
    } else {
      symbols = piece;
    }
    if (auto it = ids_.find(symbols); it != ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  if (alphabet_ == BpeAlphabet::kBytes) {
    byte_symbols_of(piece, symbols);
  } else {
    character_symbols_of(piece, symbols);
  }
  const auto n = static_cast<int32_t>(symbols.size());
  if (n == 0) return;
  using Entry = std::tuple<int32_t, int32_t, int32_t>;  // rank, position, merged id
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
  auto push = [&](int32_t at) {
    if (at < 0 || symbols[at].next < 0) return;
    auto it = merges_.find(pair_key(symbols[at].id, symbols[symbols[at].next].id));
    if (it != merges_.end()) queue.emplace(it->second.rank, at, it->second.id);
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    auto [rank, at, merged] = queue.top();
    queue.pop();
    Symbol& left = symbols[at];
    if (left.removed || left.next < 0) continue;
    auto it = merges_.find(pair_key(left.id, symbols[left.next].id));
    if (it == merges_.end() || it->second.id != merged) continue;  // stale: the pair changed
    Symbol& right = symbols[left.next];
    right.removed = true;
    left.id = merged;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = at;
    push(left.prev);
    push(at);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

void ByteLevelBpe::byte_symbols_of(std::string_view piece, std::vector<Symbol>& symbols) const {
  const auto n = static_cast<int32_t>(piece.size());
  for (int32_t i = 0; i < n; ++i) {
    const auto byte = static_cast<unsigned char>(piece[static_cast<size_t>(i)]);
    require(byte_ids_[byte] >= 0, source_ + ": symbol '" + byte_symbols()[byte] +
                                      "' is not in the vocabulary (byte " + std::to_string(byte) +
                                      "); a byte-level vocabulary must hold all 256 byte symbols");
    symbols.push_back({byte_ids_[byte], i - 1, i + 1 < n ? i + 1 : -1, false});
  }
}

// `tokenizers`' BPE::merge_word with byte_fallback: a character outside the
// vocabulary becomes its bytes' <0xNN> tokens when all of them are there,
// else the unknown token (consecutive ones fused into one).
void ByteLevelBpe::character_symbols_of(std::string_view piece, std::vector<Symbol>& symbols) const {
  auto add = [&](int32_t id) {
    const auto at = static_cast<int32_t>(symbols.size());
    if (at > 0) symbols.back().next = at;
    symbols.push_back({id, at - 1, -1, false});
  };
  for (size_t i = 0; i < piece.size();) {
    const size_t length = std::min(utf8_length(static_cast<unsigned char>(piece[i])), piece.size() - i);
    const std::string_view character = piece.substr(i, length);
    i += length;
    if (auto it = character_ids_.find(decode_utf8(character)); it != character_ids_.end()) {
      add(it->second);
      continue;
    }
    const bool all_bytes = std::all_of(character.begin(), character.end(),
                                       [&](char b) { return byte_ids_[static_cast<unsigned char>(b)] >= 0; });
    if (all_bytes) {
      for (char b : character) add(byte_ids_[static_cast<unsigned char>(b)]);
      continue;
    }
    require(unk_ >= 0, source_ + ": the character '" + std::string(character) +
                           "' is in neither the vocabulary nor its bytes (<0xNN>), and the model has no unk_token");
    if (symbols.empty() || symbols.back().id != unk_) add(unk_);
  }
}

}  // namespace mh::data
