// Byte-level BPE, the model behind GPT-2, Llama 3 and most current
// tokenizers: each byte of a pre-tokenised piece becomes GPT-2's printable
// stand-in symbol, then adjacent symbols merge, lowest merge rank first (the
// leftmost of equal ranks), until no listed pair is left; the result is
// looked up in the vocabulary. The merge runs on a priority queue, as in
// Hugging Face `tokenizers`, so a piece of n bytes costs O(n log n), and
// recent pieces are cached, as there.
//
// The same merges also run over characters (kCharacters), as SentencePiece's
// BPE models do once converted to a tokenizer.json (Llama 2, Mistral): each
// UTF-8 character of the piece is a symbol, and one the vocabulary lacks
// becomes its bytes as <0xNN> tokens (byte fallback), or the unknown token.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mh::data {

class PieceCache;

// byte -> its stand-in symbol, UTF-8 encoded (' ' is "Ġ", '\n' is "Ċ").
const std::array<std::string, 256>& byte_symbols();

// What a piece's symbols are before merging.
enum class BpeAlphabet {
  kBytes,       // each byte as its GPT-2 stand-in symbol
  kCharacters,  // each character as itself; missing ones as <0xNN> bytes
};

// The byte fallback token of a byte: "<0x0A>" for '\n'.
std::string byte_fallback_token(unsigned char byte);

class ByteLevelBpe {
 public:
  // vocab: symbol -> id, ids 0..N-1 each used once; merges best first.
  // `source` names the file(s) for messages. With ignore_merges a piece that
  // is itself in the vocabulary is taken whole (Llama 3 sets this).
  // Throws mh::Error naming source and the merge when a merge's symbols or
  // their concatenation are not in the vocabulary. With kCharacters, `unk`
  // is the id of a character neither in the vocabulary nor in its bytes (-1:
  // none, which makes such a character an error); a run of them is one unk.
  ByteLevelBpe(const std::unordered_map<std::string, int32_t>& vocab,
               const std::vector<std::pair<std::string, std::string>>& merges, std::string source,
               bool ignore_merges, BpeAlphabet alphabet = BpeAlphabet::kBytes, int32_t unk = -1);
  ~ByteLevelBpe();

  // Appends the ids of one piece to out. Throws mh::Error when a byte's
  // symbol is not in the vocabulary. Safe to call from many threads.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  int32_t vocab_size() const { return static_cast<int32_t>(token_bytes_.size()); }
  // The bytes an id stands for (kCharacters: its symbol as the vocabulary
  // spells it); empty for an id outside the vocabulary.
  const std::string& token_bytes(int32_t id) const;

 private:
  struct Merged {
    int32_t rank;
    int32_t id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return uint64_t(uint32_t(left)) << 32 | uint32_t(right);
  }
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // -1 at the ends
    bool removed;
  };
  void merge(std::string_view piece, std::vector<int32_t>& out) const;
  void byte_symbols_of(std::string_view piece, std::vector<Symbol>& symbols) const;
  void character_symbols_of(std::string_view piece, std::vector<Symbol>& symbols) const;

  std::string source_;
  bool ignore_merges_;
  BpeAlphabet alphabet_;
  int32_t unk_;
  std::array<int32_t, 256> byte_ids_;                 // -1 where the vocabulary lacks the byte
  std::unordered_map<char32_t, int32_t> character_ids_;  // kCharacters: one-character symbols
  std::unordered_map<uint64_t, Merged> merges_;       // (left, right) -> rank, merged id
  std::unordered_map<std::string, int32_t> ids_;      // symbol -> id, for ignore_merges
  std::vector<std::string> token_bytes_;              // id -> bytes
  std::unique_ptr<PieceCache> cache_;
};

}  // namespace mh::data
