#include "data/chat_template.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <variant>

namespace mh::data {
namespace {

using nlohmann::json;

// Jinja's undefined: a discarded json value.
json undefined() { return json(json::value_t::discarded); }
bool is_undefined(const json& v) { return v.is_discarded(); }

[[noreturn]] void fail(const std::string& message) { throw ChatTemplateError(message); }

// Guards against templates that would not end: renderings are for prompts.
constexpr size_t kMaxOutput = size_t(64) << 20;
constexpr int kMaxDepth = 200;
constexpr uint64_t kMaxSteps = 10'000'000;

// ---------------------------------------------------------------- lexing

struct Token {
  enum Kind { kName, kString, kInt, kFloat, kOp, kEnd } kind;
  std::string text;
  size_t at;  // offset in the source
};

bool name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::vector<Token> lex_expression(const std::string& src, size_t begin, size_t end) {
  static const char* const kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                     "(",  ")",  "[",  "]",  "{",  "}",  ",", ".", ":", "|", "="};
  std::vector<Token> out;
  size_t i = begin;
  while (i < end) {
    const char c = src[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (name_start(c)) {
      size_t j = i;
      while (j < end && name_char(src[j])) ++j;
      out.push_back({Token::kName, src.substr(i, j - i), i});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < end && (std::isdigit(static_cast<unsigned char>(src[j])) || src[j] == '_')) ++j;
      bool real = false;
      if (j + 1 < end && src[j] == '.' && std::isdigit(static_cast<unsigned char>(src[j + 1]))) {
        real = true;
        for (++j; j < end && std::isdigit(static_cast<unsigned char>(src[j]));) ++j;
      }
      std::string digits = src.substr(i, j - i);
      std::erase(digits, '_');
      out.push_back({real ? Token::kFloat : Token::kInt, digits, i});
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string s;
      size_t j = i + 1;
      for (; j < end && src[j] != c; ++j) {
        if (src[j] != '\\' || j + 1 >= end) {
          s += src[j];
          continue;
        }
        const char e = src[++j];
        switch (e) {
          case 'n': s += '\n'; break;
          case 't': s += '\t'; break;
          case 'r': s += '\r'; break;
          case '\\': s += '\\'; break;
          case '\'': s += '\''; break;
          case '"': s += '"'; break;
          default: s += '\\', s += e;
        }
      }
      if (j >= end) fail("a string opened at offset " + std::to_string(i) + " is not closed");
      out.push_back({Token::kString, s, i});
      i = j + 1;
    } else {
      bool found = false;
      for (const char* op : kOps) {
        const size_t n = std::char_traits<char>::length(op);
        if (src.compare(i, n, op) == 0 && i + n <= end) {
          out.push_back({Token::kOp, op, i});
          i += n;
          found = true;
          break;
        }
      }
      if (!found) fail("unexpected character '" + std::string(1, c) + "' at offset " + std::to_string(i));
    }
  }
  out.push_back({Token::kEnd, "", end});
  return out;
}

// ---------------------------------------------------------------- expressions

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

struct Expr {
  enum Kind {
    kLiteral, kName, kList, kDict, kAttr, kItem, kSlice, kCall, kFilter, kTest, kUnary, kBinary, kAnd, kOr,
    kNot, kIf
  } kind;
  json value;        // literal
  std::string name;  // name, attribute, filter, test, operator
  std::vector<ExprPtr> args;  // operands, items, arguments
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  size_t at = 0;
};

ExprPtr make(Expr e) { return std::make_shared<const Expr>(std::move(e)); }

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  ExprPtr expression() { return conditional(); }

  // Bounds the recursion of nested expressions (a template is outside input).
  struct Nest {
    explicit Nest(int& depth) : depth_(depth) {
      if (++depth_ > kMaxDepth) fail("an expression nests deeper than " + std::to_string(kMaxDepth));
    }
    ~Nest() { --depth_; }
    int& depth_;
  };
  const Token& peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  bool at_end() const { return peek().kind == Token::kEnd; }
  bool accept(const std::string& text) {
    if (peek().kind == Token::kString || peek().kind == Token::kEnd || peek().text != text) return false;
    ++i_;
    return true;
  }
  void expect(const std::string& text) {
    if (!accept(text)) fail("expected '" + text + "' at offset " + std::to_string(peek().at) + ", found '" +
                            peek().text + "'");
  }
  std::string name() {
    if (peek().kind != Token::kName) fail("expected a name at offset " + std::to_string(peek().at));
    return t_[i_++].text;
  }
  void finish() {
    if (!at_end()) fail("unexpected '" + peek().text + "' at offset " + std::to_string(peek().at));
  }

 private:
  ExprPtr conditional() {
    Nest nest(depth_);
    ExprPtr e = or_expr();
    while (accept("if")) {
      ExprPtr cond = or_expr();
      ExprPtr other = accept("else") ? conditional() : make({Expr::kLiteral, undefined()});
      e = make({Expr::kIf, {}, "", {cond, e, other}});
    }
    return e;
  }
  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (accept("or")) e = make({Expr::kOr, {}, "", {e, and_expr()}});
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (accept("and")) e = make({Expr::kAnd, {}, "", {e, not_expr()}});
    return e;
  }
  ExprPtr not_expr() {
    Nest nest(depth_);
    if (peek().kind == Token::kName && peek().text == "not" && !(peek(1).kind == Token::kName && peek(1).text == "in")) {
      ++i_;
      return make({Expr::kNot, {}, "", {not_expr()}});
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr e = concat();
    for (;;) {
      const Token& t = peek();
      std::string op;
      if (t.kind == Token::kOp && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" ||
                                   t.text == "<=" || t.text == ">="))
        op = t.text, ++i_;
      else if (t.kind == Token::kName && t.text == "in")
        op = "in", ++i_;
      else if (t.kind == Token::kName && t.text == "not" && peek(1).kind == Token::kName && peek(1).text == "in")
        op = "not in", i_ += 2;
      else
        return e;
      e = make({Expr::kBinary, {}, op, {e, concat()}, {}, t.at});
    }
  }
  ExprPtr concat() {
    ExprPtr e = sum();
    while (accept("~")) e = make({Expr::kBinary, {}, "~", {e, sum()}});
    return e;
  }
  ExprPtr sum() {
    ExprPtr e = product();
    for (;;) {
      const size_t at = peek().at;
      if (accept("+")) e = make({Expr::kBinary, {}, "+", {e, product()}, {}, at});
      else if (accept("-")) e = make({Expr::kBinary, {}, "-", {e, product()}, {}, at});
      else return e;
    }
  }
  ExprPtr product() {
    ExprPtr e = unary();
    for (;;) {
      const size_t at = peek().at;
      std::string op;
      for (const char* o : {"//", "*", "/", "%"})
        if (peek().kind == Token::kOp && peek().text == o) op = o;
      if (op.empty()) return e;
      ++i_;
      e = make({Expr::kBinary, {}, op, {e, unary()}, {}, at});
    }
  }
  ExprPtr unary() {
    Nest nest(depth_);
    if (accept("-")) return make({Expr::kUnary, {}, "-", {unary()}});
    if (accept("+")) return unary();
    return filtered(postfix(primary()));
  }
  ExprPtr filtered(ExprPtr e) {
    for (;;) {
      if (accept("|")) {
        Expr f{Expr::kFilter, {}, name(), {e}, {}, peek().at};
        if (accept("(")) arguments(f);
        e = make(std::move(f));
      } else if (peek().kind == Token::kName && peek().text == "is") {
        ++i_;
        const bool negated = accept("not");
        Expr test{Expr::kTest, {}, name(), {e}, {}, peek().at};
        if (accept("(")) arguments(test);
        else if (!at_end() && (peek().kind == Token::kString || peek().kind == Token::kInt ||
                               peek().kind == Token::kFloat))
          test.args.push_back(primary());
        e = make(std::move(test));
        if (negated) e = make({Expr::kNot, {}, "", {e}});
      } else {
        return e;
      }
    }
  }
  void arguments(Expr& call) {
    if (accept(")")) return;
    do {
      if (peek().kind == Token::kName && peek(1).kind == Token::kOp && peek(1).text == "=") {
        std::string key = name();
        expect("=");
        call.kwargs.emplace_back(std::move(key), expression());
      } else {
        call.args.push_back(expression());
      }
    } while (accept(","));
    expect(")");
  }
  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      const size_t at = peek().at;
      if (accept(".")) {
        e = make({Expr::kAttr, {}, name(), {e}, {}, at});
      } else if (accept("[")) {
        ExprPtr parts[3];
        bool slice = false;
        for (int k = 0; k < 3; ++k) {
          if (!(peek().kind == Token::kOp && (peek().text == ":" || peek().text == "]"))) parts[k] = expression();
          if (k < 2 && accept(":")) slice = true;
          else break;
        }
        expect("]");
        if (slice) e = make({Expr::kSlice, {}, "", {e, parts[0], parts[1], parts[2]}, {}, at});
        else if (parts[0]) e = make({Expr::kItem, {}, "", {e, parts[0]}, {}, at});
        else fail("an empty subscript at offset " + std::to_string(at));
      } else if (accept("(")) {
        Expr call{Expr::kCall, {}, "", {e}, {}, at};
        arguments(call);
        e = make(std::move(call));
      } else {
        return e;
      }
    }
  }
  ExprPtr primary() {
    const Token t = peek();
    ++i_;
    switch (t.kind) {
      case Token::kString: {
        std::string s = t.text;
        while (peek().kind == Token::kString) s += t_[i_++].text;  // adjacent literals join
        return make({Expr::kLiteral, s});
      }
      case Token::kInt:
      case Token::kFloat:
        try {
          return make({Expr::kLiteral, t.kind == Token::kInt ? json(std::stoll(t.text)) : json(std::stod(t.text))});
        } catch (const std::exception&) {
          fail("the number " + t.text + " at offset " + std::to_string(t.at) + " is out of range");
        }
      case Token::kName:
        if (t.text == "true" || t.text == "True") return make({Expr::kLiteral, true});
        if (t.text == "false" || t.text == "False") return make({Expr::kLiteral, false});
        if (t.text == "none" || t.text == "None") return make({Expr::kLiteral, nullptr});
        return make({Expr::kName, {}, t.text, {}, {}, t.at});
      case Token::kOp:
        if (t.text == "(") {
          ExprPtr e = expression();
          if (accept(",")) {  // a tuple: a list here
            Expr list{Expr::kList, {}, "", {e}};
            if (!accept(")")) {
              do list.args.push_back(expression());
              while (accept(","));
              expect(")");
            }
            return make(std::move(list));
          }
          expect(")");
          return e;
        }
        if (t.text == "[") {
          Expr list{Expr::kList};
          if (!accept("]")) {
            do {
              if (peek().kind == Token::kOp && peek().text == "]") break;
              list.args.push_back(expression());
            } while (accept(","));
            expect("]");
          }
          return make(std::move(list));
        }
        if (t.text == "{") {
          Expr dict{Expr::kDict};
          if (!accept("}")) {
            do {
              if (peek().kind == Token::kOp && peek().text == "}") break;
              dict.args.push_back(expression());
              expect(":");
              dict.args.push_back(expression());
            } while (accept(","));
            expect("}");
          }
          return make(std::move(dict));
        }
        break;
      case Token::kEnd: fail("an expression ends early at offset " + std::to_string(t.at));
    }
    fail("unexpected '" + t.text + "' at offset " + std::to_string(t.at));
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
};

// ---------------------------------------------------------------- statements

struct Node;
using Body = std::vector<std::shared_ptr<const Node>>;

struct Node {
  enum Kind { kText, kOutput, kIf, kFor, kSet, kBreak, kContinue } kind;
  std::string text;                  // text
  ExprPtr expr;                      // output, set's value, for's iterable
  std::vector<std::pair<ExprPtr, Body>> branches;  // if: conditions (null: else) and bodies
  std::vector<std::string> targets;  // for's loop variables; set's name (and attribute)
  ExprPtr filter;                    // for ... if filter
  Body body, otherwise;              // for's body and else
  Body set_body;                     // {% set x %}...{% endset %}
};

// The template's pieces after whitespace control: text, {{ }} and {% %}.
struct Piece {
  enum Kind { kText, kOutput, kStatement } kind;
  std::string text;  // text, or the tag's inside
  size_t at;
};

// Splits the source as transformers' Jinja environment does, with
// trim_blocks (a block tag's newline dropped) and lstrip_blocks (the
// indentation before a block tag on its own line dropped).
size_t next_tag(const std::string& src, size_t from) {
  for (size_t at = src.find('{', from); at != std::string::npos && at + 1 < src.size(); at = src.find('{', at + 1))
    if (src[at + 1] == '{' || src[at + 1] == '%' || src[at + 1] == '#') return at;
  return std::string::npos;
}

const char* const kSpace = " \t\r\n\f\v";

std::vector<Piece> split(const std::string& src) {
  std::vector<Piece> out;
  size_t i = 0;
  bool strip_next = false;    // the last tag ended with '-'
  bool newline_next = false;  // the last tag was a block tag
  bool line_starting = true;  // the text begins a line
  for (;;) {
    const size_t open = next_tag(src, i);
    std::string text = src.substr(i, (open == std::string::npos ? src.size() : open) - i);
    if (strip_next) {
      const size_t keep = text.find_first_not_of(kSpace);
      line_starting = keep == std::string::npos ? line_starting : (keep > 0 && text[keep - 1] == '\n');
      text.erase(0, keep == std::string::npos ? text.size() : keep);
    } else if (newline_next && text.rfind("\n", 0) == 0) {
      text.erase(0, 1);
      line_starting = true;
    } else if (newline_next && text.rfind("\r\n", 0) == 0) {
      text.erase(0, 2);
      line_starting = true;
    }
    if (open == std::string::npos) {
      if (!text.empty()) out.push_back({Piece::kText, text, i});
      return out;
    }
    const char kind = src[open + 1];
    const char* close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    const size_t end = src.find(close, open + 2);
    if (end == std::string::npos) fail("a tag opened at offset " + std::to_string(open) + " is not closed");
    size_t inner = open + 2, inner_end = end;
    const char sign = inner < inner_end ? src[inner] : ' ';
    if (sign == '-' || sign == '+') ++inner;
    strip_next = inner < inner_end && src[inner_end - 1] == '-';
    if (strip_next) --inner_end;
    if (sign == '-') {
      const size_t last = text.find_last_not_of(kSpace);
      text.erase(last == std::string::npos ? 0 : last + 1);
    } else if (kind != '{' && sign != '+') {
      const size_t line = text.rfind('\n');
      const size_t from = line == std::string::npos ? 0 : line + 1;
      if ((line != std::string::npos || line_starting) && text.find_first_not_of(" \t", from) == std::string::npos)
        text.erase(from);
    }
    if (!text.empty()) out.push_back({Piece::kText, text, i});
    if (kind == '{') out.push_back({Piece::kOutput, src.substr(inner, inner_end - inner), inner});
    else if (kind == '%') out.push_back({Piece::kStatement, src.substr(inner, inner_end - inner), inner});
    newline_next = kind != '{';
    line_starting = false;
    i = end + 2;
  }
}

class TemplateParser {
 public:
  explicit TemplateParser(const std::string& src) : src_(src), pieces_(split(src)) {}

  Body parse() {
    Body body = block({});
    if (i_ < pieces_.size()) fail("'" + keyword(pieces_[i_]) + "' at offset " + std::to_string(pieces_[i_].at) +
                                  " closes nothing");
    return body;
  }

 private:
  ExprParser tag(const Piece& p) const { return ExprParser(lex_expression(src_, p.at, p.at + p.text.size())); }
  static std::string keyword(const Piece& p) {
    const size_t b = p.text.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return "";
    size_t e = b;
    while (e < p.text.size() && name_char(p.text[e])) ++e;
    return p.text.substr(b, e - b);
  }

  // Pieces up to (not including) a statement whose keyword is in `ends`.
  Body block(const std::vector<std::string>& ends) {
    if (++depth_ > kMaxDepth) fail("blocks nest deeper than " + std::to_string(kMaxDepth));
    Body body;
    for (; i_ < pieces_.size(); ++i_) {
      const Piece& p = pieces_[i_];
      if (p.kind == Piece::kText) {
        body.push_back(std::make_shared<Node>(Node{Node::kText, p.text}));
        continue;
      }
      if (p.kind == Piece::kOutput) {
        ExprParser e = tag(p);
        Node n{Node::kOutput};
        n.expr = e.expression();
        e.finish();
        body.push_back(std::make_shared<Node>(std::move(n)));
        continue;
      }
      const std::string k = keyword(p);
      if (std::find(ends.begin(), ends.end(), k) != ends.end()) break;
      body.push_back(statement(p, k));
    }
    if (i_ >= pieces_.size() && !ends.empty()) fail("'" + ends.back() + "' is missing at the end of the template");
    --depth_;
    return body;
  }

  std::shared_ptr<const Node> statement(const Piece& p, const std::string& k) {
    ExprParser e = tag(p);
    e.name();
    if (k == "if") return if_statement(e);
    if (k == "for") return for_statement(e);
    if (k == "set") return set_statement(e);
    if (k == "break" || k == "continue") {
      e.finish();
      return std::make_shared<Node>(Node{k == "break" ? Node::kBreak : Node::kContinue});
    }
    fail("'" + k + "' at offset " + std::to_string(p.at) + " is not supported (docs/serve.md lists the Jinja subset)");
  }

  std::shared_ptr<const Node> if_statement(ExprParser& e) {
    Node n{Node::kIf};
    ExprPtr cond = e.expression();
    e.finish();
    for (;;) {
      ++i_;
      Body body = block({"elif", "else", "endif"});
      n.branches.emplace_back(cond, std::move(body));
      const std::string k = keyword(pieces_[i_]);
      if (k == "endif") break;
      ExprParser next = tag(pieces_[i_]);
      next.name();
      cond = k == "elif" ? next.expression() : nullptr;
      next.finish();
      if (k == "else") {
        ++i_;
        n.branches.emplace_back(nullptr, block({"endif"}));
        break;
      }
    }
    return std::make_shared<Node>(std::move(n));
  }

  std::shared_ptr<const Node> for_statement(ExprParser& e) {
    Node n{Node::kFor};
    do n.targets.push_back(e.name());
    while (e.accept(","));
    e.expect("in");
    n.expr = e.expression();
    if (e.accept("if")) n.filter = e.expression();
    e.accept("recursive") ? fail("recursive loops are not supported") : void();
    e.finish();
    ++i_;
    n.body = block({"else", "endfor"});
    if (keyword(pieces_[i_]) == "else") {
      ++i_;
      n.otherwise = block({"endfor"});
    }
    return std::make_shared<Node>(std::move(n));
  }

  std::shared_ptr<const Node> set_statement(ExprParser& e) {
    Node n{Node::kSet};
    n.targets.push_back(e.name());
    if (e.accept(".")) n.targets.push_back(e.name());
    if (e.accept("=")) {
      n.expr = e.expression();
      e.finish();
      return std::make_shared<Node>(std::move(n));
    }
    e.finish();
    ++i_;
    n.set_body = block({"endset"});
    return std::make_shared<Node>(std::move(n));
  }

  const std::string& src_;
  std::vector<Piece> pieces_;
  size_t i_ = 0;
  int depth_ = 0;
};

// ---------------------------------------------------------------- values

// Strings index, slice, count and reverse by character, as Python's: the
// UTF-8 text split into characters (a byte of broken UTF-8 is one).
std::vector<std::string> characters(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = uint8_t(s[i]);
    size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    for (size_t k = 1; k < n; ++k)
      if ((uint8_t(s[i + k]) & 0xC0) != 0x80) n = 1;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

json character_list(const std::string& s) {
  json out = json::array();
  for (std::string& c : characters(s)) out.push_back(std::move(c));
  return out;
}

bool truthy(const json& v) {
  if (is_undefined(v) || v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer()) return v.get<int64_t>() != 0;
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string()) return !v.get_ref<const std::string&>().empty();
  return !v.empty();
}

std::string python_float(double d) {
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (std::isnan(d)) return "nan";
  std::ostringstream s;
  s.precision(17);
  s << d;
  std::string out = s.str();
  // The shortest text that reads back the same, as Python's repr.
  for (int p = 1; p <= 17; ++p) {
    std::ostringstream t;
    t.precision(p);
    t << d;
    if (std::stod(t.str()) == d) {
      out = t.str();
      break;
    }
  }
  if (out.find_first_of(".en") == std::string::npos) out += ".0";
  return out;
}

std::string repr(const json& v);

std::string str(const json& v) {
  if (is_undefined(v)) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number()) return python_float(v.get<double>());
  std::string out;
  if (v.is_array()) {
    out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + repr(v[i]);
    return out + "]";
  }
  out = "{";
  bool first = true;
  for (const auto& [k, x] : v.items()) {
    out += (first ? "" : ", ") + repr(json(k)) + ": " + repr(x);
    first = false;
  }
  return out + "}";
}

std::string repr(const json& v) {
  if (!v.is_string()) return str(v);
  const std::string& s = v.get_ref<const std::string&>();
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\') out += '\\';
    if (c == '\n') out += "\\n";
    else out += c;
  }
  return out + q;
}

// Python's json.dumps(x, ensure_ascii=False) with optional indent.
std::string to_json(const json& v, int indent, int level = 0) {
  if (is_undefined(v)) fail("tojson of an undefined value");
  const std::string pad = indent > 0 ? "\n" + std::string(size_t(indent * (level + 1)), ' ') : "";
  const std::string close = indent > 0 ? "\n" + std::string(size_t(indent * level), ' ') : "";
  const std::string sep = indent > 0 ? "," : ", ";
  if (v.is_array()) {
    if (v.empty()) return "[]";
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + pad + to_json(v[i], indent, level + 1);
    return out + close + "]";
  }
  if (v.is_object()) {
    if (v.empty()) return "{}";
    std::string out = "{";
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      out += (first ? "" : sep) + pad + json(k).dump(-1, ' ', false, json::error_handler_t::replace) + ": " +
             to_json(x, indent, level + 1);
      first = false;
    }
    return out + close + "}";
  }
  if (v.is_number_float()) return python_float(v.get<double>());
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

int64_t to_int(const json& v, const char* what) {
  if (v.is_number_integer() || v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_boolean()) return v.get<bool>();
  fail(std::string(what) + " needs an integer, got " + repr(v));
}

bool equal(const json& a, const json& b) {
  if (is_undefined(a) || is_undefined(b)) return is_undefined(a) && is_undefined(b);
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

bool less(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() < b.get<double>();
  if (a.is_string() && b.is_string()) return a.get<std::string>() < b.get<std::string>();
  fail("cannot compare " + repr(a) + " and " + repr(b));
}

json arithmetic(const std::string& op, const json& a, const json& b) {
  if (op == "+" && a.is_string() && b.is_string()) return a.get<std::string>() + b.get<std::string>();
  if (op == "+" && a.is_array() && b.is_array()) {
    json out = a;
    for (const json& x : b) out.push_back(x);
    return out;
  }
  if (!(a.is_number() || a.is_boolean()) || !(b.is_number() || b.is_boolean()))
    fail("cannot apply '" + op + "' to " + repr(a) + " and " + repr(b));
  const bool ints = !a.is_number_float() && !b.is_number_float();
  if (ints && op != "/") {
    const int64_t x = to_int(a, op.c_str()), y = to_int(b, op.c_str());
    int64_t r = 0;
    if (op == "+" || op == "-" || op == "*") {
      const bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &r)
                            : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                        : __builtin_mul_overflow(x, y, &r);
      if (overflow) fail("integer overflow in '" + op + "'");
      return r;
    }
    if (y == 0) fail("division by zero");
    if (y == -1 && x == INT64_MIN) fail("integer overflow in '" + op + "'");
    if (op == "//") return x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
    if (op == "%") return ((x % y) + y) % y;
  }
  const double x = a.get<double>(), y = b.get<double>();
  if (op == "+") return x + y;
  if (op == "-") return x - y;
  if (op == "*") return x * y;
  if (y == 0) fail("division by zero");
  if (op == "/") return x / y;
  if (op == "//") return std::floor(x / y);
  return x - y * std::floor(x / y);
}

bool contains(const json& container, const json& item) {
  if (container.is_string()) {
    if (!item.is_string()) fail("'in <string>' needs a string on the left, got " + repr(item));
    return container.get<std::string>().find(item.get<std::string>()) != std::string::npos;
  }
  if (container.is_array())
    return std::any_of(container.begin(), container.end(), [&](const json& x) { return equal(x, item); });
  if (container.is_object()) return item.is_string() && container.contains(item.get<std::string>());
  if (is_undefined(container)) return false;
  fail("'in' needs a string, list or mapping, got " + repr(container));
}

std::string strip(const std::string& s, const std::string& chars = " \t\r\n\f\v") {
  const size_t b = s.find_first_not_of(chars);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(chars) - b + 1);
}

// Python's str.split(sep) (or on whitespace runs without one).
json split_string(const std::string& s, const json& sep) {
  json out = json::array();
  if (is_undefined(sep) || sep.is_null()) {
    std::istringstream in(s);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
  }
  const std::string d = sep.get<std::string>();
  if (d.empty()) fail("split with an empty separator");
  size_t from = 0;
  for (size_t at; (at = s.find(d, from)) != std::string::npos; from = at + d.size()) out.push_back(s.substr(from, at - from));
  out.push_back(s.substr(from));
  return out;
}

std::string title(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c));
    c = char(alpha ? (start ? std::toupper(c) : std::tolower(c)) : c);
    start = !alpha;
  }
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) s.replace(at, from.size(), to);
  return s;
}

json items(const json& v) {
  if (!v.is_object()) fail("items() of " + repr(v) + ", not a mapping");
  json out = json::array();
  for (const auto& [k, x] : v.items()) out.push_back(json::array({k, x}));
  return out;
}

// ---------------------------------------------------------------- rendering

class Renderer {
 public:
  Renderer(const json& globals, std::string& out) : out_(out) { scopes_.push_back(globals); }

  enum class Flow { kNormal, kBreak, kContinue };

  Flow run(const Body& body) {
    for (const auto& n : body)
      if (Flow f = run(*n); f != Flow::kNormal) return f;
    return Flow::kNormal;
  }

 private:
  Flow run(const Node& n) {
    if (++steps_ > kMaxSteps) fail("the template runs more than " + std::to_string(kMaxSteps) + " statements");
    switch (n.kind) {
      case Node::kText: write(n.text); break;
      case Node::kOutput: write(str(eval(*n.expr))); break;
      case Node::kIf:
        for (const auto& [cond, body] : n.branches)
          if (cond == nullptr || truthy(eval(*cond))) return run(body);
        break;
      case Node::kFor: return run_for(n), Flow::kNormal;
      case Node::kSet: set(n); break;
      case Node::kBreak: return Flow::kBreak;
      case Node::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  void write(const std::string& s) {
    out_ += s;
    if (out_.size() > kMaxOutput) fail("the rendering exceeds 64 MiB");
  }

  void set(const Node& n) {
    json value;
    if (n.expr) {
      value = eval(*n.expr);
    } else {
      std::string captured;
      std::swap(out_, captured);
      run(n.set_body);
      std::swap(out_, captured);
      value = captured;
    }
    if (n.targets.size() == 1) {
      scopes_.back()[n.targets[0]] = value;
      return;
    }
    json* ns = find(n.targets[0]);
    if (ns == nullptr || !ns->is_object() || !ns->contains("__namespace__"))
      fail("'set " + n.targets[0] + "." + n.targets[1] + "' needs " + n.targets[0] + " to be a namespace()");
    (*ns)[n.targets[1]] = value;
  }

  void run_for(const Node& n) {
    json seq = eval(*n.expr);
    if (seq.is_object()) {
      json keys = json::array();
      for (const auto& [k, x] : seq.items()) keys.push_back(k);
      seq = keys;
    } else if (seq.is_string()) {
      seq = character_list(seq.get<std::string>());
    } else if (is_undefined(seq) || seq.is_null()) {
      seq = json::array();
    } else if (!seq.is_array()) {
      fail("cannot loop over " + repr(seq));
    }
    if (n.filter) {
      json kept = json::array();
      for (const json& x : seq) {
        scopes_.push_back(json::object());
        bind(n.targets, x);
        if (truthy(eval(*n.filter))) kept.push_back(x);
        scopes_.pop_back();
      }
      seq = kept;
    }
    if (seq.empty()) {
      run(n.otherwise);
      return;
    }
    const size_t length = seq.size();
    for (size_t i = 0; i < length; ++i) {
      if (++steps_ > kMaxSteps) fail("the template runs more than " + std::to_string(kMaxSteps) + " statements");
      scopes_.push_back(json::object());
      bind(n.targets, seq[i]);
      scopes_.back()["loop"] = {{"index", i + 1},          {"index0", i},
                                {"revindex", length - i},  {"revindex0", length - i - 1},
                                {"first", i == 0},         {"last", i + 1 == length},
                                {"length", length},        {"previtem", i > 0 ? seq[i - 1] : undefined()},
                                {"nextitem", i + 1 < length ? seq[i + 1] : undefined()}};
      const Flow f = run(n.body);
      scopes_.pop_back();
      if (f == Flow::kBreak) break;
    }
  }

  void bind(const std::vector<std::string>& targets, const json& x) {
    if (targets.size() == 1) {
      scopes_.back()[targets[0]] = x;
      return;
    }
    if (!x.is_array() || x.size() != targets.size())
      fail("cannot unpack " + repr(x) + " into " + std::to_string(targets.size()) + " loop variables");
    for (size_t i = 0; i < targets.size(); ++i) scopes_.back()[targets[i]] = x[i];
  }

  json* find(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (auto f = it->find(name); f != it->end()) return &*f;
    return nullptr;
  }

  json eval(const Expr& e) {
    if (++depth_ > kMaxDepth) fail("an expression nests deeper than " + std::to_string(kMaxDepth));
    json v = eval_inner(e);
    --depth_;
    return v;
  }

  json eval_inner(const Expr& e) {
    switch (e.kind) {
      case Expr::kLiteral: return e.value;
      case Expr::kName: {
        const json* v = find(e.name);
        return v != nullptr ? *v : undefined();
      }
      case Expr::kList: {
        json out = json::array();
        for (const auto& a : e.args) out.push_back(eval(*a));
        return out;
      }
      case Expr::kDict: {
        json out = json::object();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) out[str(eval(*e.args[i]))] = eval(*e.args[i + 1]);
        return out;
      }
      case Expr::kAttr: return attribute(eval(*e.args[0]), e.name);
      case Expr::kItem: return item(eval(*e.args[0]), eval(*e.args[1]));
      case Expr::kSlice: return slice(e);
      case Expr::kCall: return call(e);
      case Expr::kFilter: return filter(e);
      case Expr::kTest: return test(e);
      case Expr::kUnary: return arithmetic("-", json(0), eval(*e.args[0]));
      case Expr::kBinary: return binary(e);
      case Expr::kAnd: {
        json a = eval(*e.args[0]);
        return truthy(a) ? eval(*e.args[1]) : a;
      }
      case Expr::kOr: {
        json a = eval(*e.args[0]);
        return truthy(a) ? a : eval(*e.args[1]);
      }
      case Expr::kNot: return !truthy(eval(*e.args[0]));
      case Expr::kIf: return truthy(eval(*e.args[0])) ? eval(*e.args[1]) : eval(*e.args[2]);
    }
    return undefined();
  }

  static json attribute(const json& v, const std::string& name) {
    if (v.is_object()) {
      if (auto it = v.find(name); it != v.end()) return *it;
    }
    return undefined();
  }

  static json item(const json& v, const json& key) {
    if (v.is_array() && (key.is_number_integer() || key.is_number_unsigned())) {
      int64_t i = key.get<int64_t>();
      if (i < 0) i += int64_t(v.size());
      return i >= 0 && i < int64_t(v.size()) ? v[size_t(i)] : undefined();
    }
    if (v.is_string() && key.is_number_integer()) return item(character_list(v.get<std::string>()), key);
    if (v.is_object() && key.is_string()) return attribute(v, key.get<std::string>());
    return undefined();
  }

  json slice(const Expr& e) {
    const json whole = eval(*e.args[0]);
    if (!whole.is_array() && !whole.is_string()) fail("cannot slice " + repr(whole));
    const json v = whole.is_string() ? character_list(whole.get<std::string>()) : whole;
    const int64_t n = int64_t(v.size());
    const auto bound = [&](const ExprPtr& p, int64_t fallback) {
      if (!p) return fallback;
      const json b = eval(*p);
      return b.is_null() ? fallback : to_int(b, "a slice");
    };
    int64_t step = bound(e.args[3], 1);
    if (step == 0) fail("a slice step of 0");
    step = std::clamp<int64_t>(step, -(n + 1), n + 1);  // a longer step takes one item, as it does
    const auto clamp = [&](int64_t i, int64_t lo, int64_t hi) {
      if (i < 0) i += n;
      return std::clamp(i, lo, hi);
    };
    const int64_t start = e.args[1] ? clamp(bound(e.args[1], 0), step > 0 ? 0 : -1, step > 0 ? n : n - 1)
                                    : (step > 0 ? 0 : n - 1);
    const int64_t stop = e.args[2] ? clamp(bound(e.args[2], n), step > 0 ? 0 : -1, step > 0 ? n : n - 1)
                                   : (step > 0 ? n : -1);
    std::vector<int64_t> at;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) at.push_back(i);
    if (whole.is_string()) {
      std::string out;
      for (int64_t i : at) out += v[size_t(i)].get_ref<const std::string&>();
      return out;
    }
    json out = json::array();
    for (int64_t i : at) out.push_back(v[size_t(i)]);
    return out;
  }

  std::vector<json> args(const Expr& e, size_t skip) {
    std::vector<json> out;
    for (size_t i = skip; i < e.args.size(); ++i) out.push_back(eval(*e.args[i]));
    return out;
  }

  json call(const Expr& e) {
    const Expr& f = *e.args[0];
    const std::vector<json> a = args(e, 1);
    const auto arg = [&](size_t i) { return i < a.size() ? a[i] : undefined(); };
    if (f.kind == Expr::kName) {
      if (f.name == "raise_exception") fail(str(arg(0)));
      if (f.name == "namespace") {
        json ns = {{"__namespace__", true}};
        for (const auto& [k, v] : e.kwargs) ns[k] = eval(*v);
        return ns;
      }
      if (f.name == "range") {
        int64_t lo = 0, hi = to_int(arg(0), "range"), step = 1;
        if (a.size() >= 2) lo = hi, hi = to_int(a[1], "range");
        if (a.size() >= 3) step = to_int(a[2], "range");
        if (step == 0 || (__int128(hi) - lo) / step > 1'000'000) fail("range() too long, or with a step of 0");
        json out = json::array();
        for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) out.push_back(i);
        return out;
      }
      fail("unknown function '" + f.name + "' at offset " + std::to_string(f.at));
    }
    if (f.kind != Expr::kAttr) fail("only functions and methods can be called (offset " + std::to_string(e.at) + ")");
    const json self = eval(*f.args[0]);
    const std::string& m = f.name;
    if (self.is_string()) {
      const std::string& s = self.get_ref<const std::string&>();
      const auto chars = [&] { return is_undefined(arg(0)) || arg(0).is_null() ? std::string(" \t\r\n\f\v") : str(arg(0)); };
      if (m == "strip") return strip(s, chars());
      if (m == "lstrip") return s.substr(std::min(s.size(), s.find_first_not_of(chars())));
      if (m == "rstrip") {
        const size_t e2 = s.find_last_not_of(chars());
        return e2 == std::string::npos ? std::string() : s.substr(0, e2 + 1);
      }
      if (m == "upper" || m == "lower") {
        std::string out = s;
        for (char& c : out) c = char(m == "upper" ? std::toupper(c) : std::tolower(c));
        return out;
      }
      if (m == "startswith") return s.rfind(str(arg(0)), 0) == 0;
      if (m == "endswith") {
        const std::string x = str(arg(0));
        return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
      }
      if (m == "split") return split_string(s, arg(0));
      if (m == "replace") return replace_all(s, str(arg(0)), str(arg(1)));
      if (m == "title") return title(s);
      if (m == "capitalize") return title(s.substr(0, 1)) + [&] {
        std::string rest = s.size() > 1 ? s.substr(1) : "";
        for (char& c : rest) c = char(std::tolower(c));
        return rest;
      }();
      if (m == "format") fail("str.format is not supported");
    }
    if (self.is_object()) {
      if (m == "items") return items(self);
      if (m == "keys" || m == "values") {
        json out = json::array();
        for (const auto& [k, x] : self.items()) out.push_back(m == "keys" ? json(k) : x);
        return out;
      }
      if (m == "get") {
        const json v = attribute(self, str(arg(0)));
        return is_undefined(v) ? (a.size() > 1 ? a[1] : json(nullptr)) : v;
      }
    }
    fail("no method '" + m + "' on " + repr(self) + " (offset " + std::to_string(f.at) + ")");
  }

  json filter(const Expr& e) {
    const json v = eval(*e.args[0]);
    const std::vector<json> a = args(e, 1);
    const auto arg = [&](size_t i) { return i < a.size() ? a[i] : undefined(); };
    const std::string& f = e.name;
    if (f == "trim") return strip(str(v));
    if (f == "length" || f == "count") {
      if (v.is_string()) return characters(v.get<std::string>()).size();
      if (v.is_array() || v.is_object()) return v.size();
      fail("length of " + repr(v));
    }
    if (f == "upper" || f == "lower") {
      std::string out = str(v);
      for (char& c : out) c = char(f == "upper" ? std::toupper(c) : std::tolower(c));
      return out;
    }
    if (f == "capitalize") {
      std::string out = str(v);
      for (size_t i = 0; i < out.size(); ++i) out[i] = char(i == 0 ? std::toupper(out[i]) : std::tolower(out[i]));
      return out;
    }
    if (f == "title") return title(str(v));
    if (f == "string") return str(v);
    if (f == "safe" || f == "e" || f == "escape") return v;
    if (f == "tojson") {
      int64_t indent = 0;
      for (const auto& [k, x] : e.kwargs)
        if (k == "indent") indent = to_int(eval(*x), "tojson's indent");
      if (!a.empty()) indent = to_int(a[0], "tojson's indent");
      return to_json(v, int(indent));
    }
    if (f == "first" || f == "last") {
      if (v.is_array()) return v.empty() ? undefined() : (f == "first" ? v.front() : v.back());
      if (v.is_string()) {
        const std::vector<std::string> c = characters(v.get<std::string>());
        return c.empty() ? undefined() : json(f == "first" ? c.front() : c.back());
      }
      fail(f + " of " + repr(v));
    }
    if (f == "default" || f == "d") {
      const bool boolean = a.size() > 1 && truthy(a[1]);
      return (boolean ? !truthy(v) : is_undefined(v)) ? (a.empty() ? json("") : a[0]) : v;
    }
    if (f == "join") {
      if (!v.is_array()) fail("join of " + repr(v));
      std::string out;
      for (size_t i = 0; i < v.size(); ++i) out += (i ? str(arg(0)) : "") + str(v[i]);
      return out;
    }
    if (f == "replace") return replace_all(str(v), str(arg(0)), str(arg(1)));
    if (f == "list") {
      if (v.is_array()) return v;
      if (v.is_string()) return character_list(v.get<std::string>());
      if (v.is_object()) return call_keys(v);
      fail("list of " + repr(v));
    }
    if (f == "reverse") {
      if (v.is_string()) {
        std::string out;
        const std::vector<std::string> c = characters(v.get<std::string>());
        for (auto it = c.rbegin(); it != c.rend(); ++it) out += *it;
        return out;
      }
      if (!v.is_array()) fail("reverse of " + repr(v));
      return json(std::vector<json>(v.rbegin(), v.rend()));
    }
    if (f == "items") return items(v);
    if (f == "int") {
      if (v.is_number()) return int64_t(v.get<double>());
      if (v.is_string()) {
        try {
          return std::stoll(v.get<std::string>());
        } catch (const std::exception&) {
          return 0;
        }
      }
      return 0;
    }
    if (f == "float") return v.is_number() ? v.get<double>() : 0.0;
    if (f == "abs") {
      if (!v.is_number()) fail("abs of " + repr(v));
      if (v.is_number_integer() && v.get<int64_t>() != INT64_MIN) return std::llabs(v.get<int64_t>());
      return std::fabs(v.get<double>());
    }
    fail("unknown filter '" + f + "' at offset " + std::to_string(e.at));
  }

  static json call_keys(const json& v) {
    json out = json::array();
    for (const auto& [k, x] : v.items()) out.push_back(k);
    return out;
  }

  json test(const Expr& e) {
    const std::string& t = e.name;
    const json v = eval(*e.args[0]);
    const std::vector<json> a = args(e, 1);
    if (t == "defined") return !is_undefined(v);
    if (t == "undefined") return is_undefined(v);
    if (t == "none") return v.is_null();
    if (t == "string") return v.is_string();
    if (t == "number") return v.is_number();
    if (t == "integer") return v.is_number_integer();
    if (t == "float") return v.is_number_float();
    if (t == "boolean") return v.is_boolean();
    if (t == "true") return v.is_boolean() && v.get<bool>();
    if (t == "false") return v.is_boolean() && !v.get<bool>();
    if (t == "mapping") return v.is_object();
    if (t == "sequence" || t == "iterable") return v.is_array() || v.is_string() || (t == "iterable" && v.is_object());
    if (t == "even" || t == "odd") return (to_int(v, t.c_str()) % 2 == 0) == (t == "even");
    if (t == "divisibleby") return a.empty() ? false : to_int(v, t.c_str()) % to_int(a[0], t.c_str()) == 0;
    if (t == "equalto" || t == "eq" || t == "sameas") return !a.empty() && equal(v, a[0]);
    if (t == "in") return !a.empty() && contains(a[0], v);
    fail("unknown test '" + t + "' at offset " + std::to_string(e.at));
  }

  json binary(const Expr& e) {
    const std::string& op = e.name;
    const json a = eval(*e.args[0]), b = eval(*e.args[1]);
    if (op == "~") return str(a) + str(b);
    if (op == "==") return equal(a, b);
    if (op == "!=") return !equal(a, b);
    if (op == "<") return less(a, b);
    if (op == ">") return less(b, a);
    if (op == "<=") return !less(b, a);
    if (op == ">=") return !less(a, b);
    if (op == "in") return contains(b, a);
    if (op == "not in") return !contains(b, a);
    if (is_undefined(a) || is_undefined(b))
      fail("'" + op + "' of an undefined value at offset " + std::to_string(e.at));
    return arithmetic(op, a, b);
  }

  std::string& out_;
  std::vector<json> scopes_;
  int depth_ = 0;
  uint64_t steps_ = 0;
};

std::string special_token(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

}  // namespace

struct ChatTemplate::Program {
  Body body;
};

namespace {

// Jinja drops one newline at the end of a template (keep_trailing_newline off).
std::string without_trailing_newline(std::string s) {
  if (s.size() >= 2 && s.compare(s.size() - 2, 2, "\r\n") == 0) s.resize(s.size() - 2);
  else if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, std::string bos_token, std::string eos_token)
    : program_(std::make_unique<Program>(Program{TemplateParser(without_trailing_newline(source)).parse()})),
      tokens_({{"bos_token", std::move(bos_token)}, {"eos_token", std::move(eos_token)}}) {}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;

ChatTemplate ChatTemplate::from_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("cannot read " + file.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (file.extension() != ".json") return ChatTemplate(text.str(), "", "");
  const json config = json::parse(text.str(), nullptr, false);
  if (!config.is_object()) fail(file.string() + " is not a JSON object");
  const json t = config.value("chat_template", json());
  std::string source;
  if (t.is_string()) {
    source = t.get<std::string>();
  } else if (t.is_array()) {
    for (const json& named : t)
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
          named["template"].is_string())
        source = named["template"].get<std::string>();
  }
  if (source.empty()) fail(file.string() + " has no \"chat_template\" string (nor a list with a \"default\" one)");
  return ChatTemplate(source, special_token(config.value("bos_token", json())),
                      special_token(config.value("eos_token", json())));
}

std::string ChatTemplate::render(const json& context) const {
  json globals = tokens_;
  if (context.is_object())
    for (const auto& [k, v] : context.items()) globals[k] = v;
  std::string out;
  Renderer(globals, out).run(program_->body);
  return out;
}

}  // namespace mh::data
