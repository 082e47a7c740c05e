// JSON Schema (draft 2020-12, with draft-7 spellings accepted) compiled to a graph of
// nodes, and a validator over that graph.
//
// Keywords understood (anything else is an error in SchemaUse::generation and an
// ignored annotation in SchemaUse::validation, as the specification says):
//   type (string or array), enum, const, $ref (local "#..." JSON pointers, recursion
//   allowed; siblings of $ref apply, as in 2020-12), $defs / definitions,
//   anyOf, oneOf, allOf, not, if/then/else,
//   minLength, maxLength, pattern (see regex.hpp), format (date, time, date-time, uuid:
//   checked as patterns, see format_pattern(); other formats are errors in generation
//   and ignored in validation),
//   minimum, maximum, exclusiveMinimum, exclusiveMaximum (numbers), multipleOf,
//   items (schema, or the draft-7 array form), prefixItems, additionalItems, minItems,
//   maxItems, uniqueItems, contains,
//   properties, required, additionalProperties, patternProperties, propertyNames,
//   minProperties, maxProperties,
//   annotations: $schema, $id (root only), $comment, title, description, default,
//   examples, deprecated, readOnly, writeOnly, contentEncoding, contentMediaType.
// Rejected everywhere (never silently ignored): dependencies, dependentRequired,
// dependentSchemas, unevaluated*, $dynamicRef, $recursiveRef, remote or $id/anchor
// references, and malformed keyword values. Errors name the keyword's JSON pointer.
// Which of these keywords the generation grammar can enforce is json_grammar.hpp's
// business: the schema here is exactly what validation checks.
//
// Values are nlohmann::ordered_json so that an object's key order (the order in which
// properties are generated) survives parsing.
//
// Thread-safety: a JsonSchema is immutable after compile; validate() is const and safe
// from several threads. Cost: validate is linear in the document times the schema
// alternatives it tries (anyOf/oneOf re-validate the subtree per alternative).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.hpp"
#include "model/char_dfa.hpp"

namespace arbor::model {

using Json = nlohmann::ordered_json;

enum class SchemaUse { validation, generation };

struct SchemaError {
  std::string pointer;  // compile: the keyword's location in the schema;
                        // validate: the failing value's location in the document
  std::string message;  // validate: also names the schema keyword's location
};
std::string describe(const std::vector<SchemaError>& errors);  // "ptr: message; ..."

// Type bits; `number` covers integers too (a type list of "number" sets both).
enum JsonTypeBit : std::uint8_t {
  kTypeNull = 1, kTypeBoolean = 2, kTypeInteger = 4, kTypeNumber = 8, kTypeString = 16,
  kTypeArray = 32, kTypeObject = 64, kTypeAll = 127,
};

using NodeId = std::int32_t;
inline constexpr NodeId kNoNode = -1;

struct SchemaNode {
  std::string pointer;                  // location in the schema document
  std::optional<bool> boolean_schema;   // `true` / `false` schemas
  std::uint8_t types = kTypeAll;
  bool has_type = false;
  std::vector<std::string> keywords;    // every keyword present, for enforceability checks
  // enum / const
  std::optional<std::vector<Json>> enum_values;
  std::optional<Json> const_value;
  // strings
  std::optional<std::uint64_t> min_length, max_length;
  std::shared_ptr<const CharDfa> pattern, format;
  std::string pattern_source, format_name;
  // numbers
  std::optional<double> minimum, maximum, exclusive_minimum, exclusive_maximum, multiple_of;
  // arrays
  std::vector<NodeId> prefix_items;
  NodeId items = kNoNode;  // after the prefix; kNoNode: anything
  std::optional<std::uint64_t> min_items, max_items;
  bool unique_items = false;
  NodeId contains = kNoNode;
  // objects
  std::vector<std::pair<std::string, NodeId>> properties;  // schema order
  std::vector<std::string> required;
  NodeId additional = kNoNode;  // kNoNode: anything
  NodeId property_names = kNoNode;
  std::vector<std::pair<std::shared_ptr<const CharDfa>, NodeId>> pattern_properties;
  std::optional<std::uint64_t> min_properties, max_properties;
  // combinators
  std::vector<NodeId> any_of, one_of, all_of;
  NodeId not_node = kNoNode, if_node = kNoNode, then_node = kNoNode, else_node = kNoNode;
  NodeId ref = kNoNode;  // resolved $ref; its siblings apply too

  bool has(std::string_view keyword) const;
};

// The regular expression Arbor checks a `format` with, or empty for unknown formats.
std::string_view format_pattern(std::string_view format);

struct ValidateOptions {
  // Also require the order Arbor generates in: declared properties in schema order
  // (`properties`, then `required` names not declared there), others after them, and
  // enum/const objects with their keys in the schema's order.
  bool schema_order = false;
  std::size_t max_errors = 16;
};

// Whether `v` is an integer as JSON Schema counts them: an integer, or a finite float with
// no fractional part (1.0; 1e300 too).
bool is_integer_value(const Json& v);

// Structural equality as JSON Schema defines it (numbers by value: 1 == 1.0); with
// `ordered`, objects must also list their keys in the same order.
bool json_equal(const Json& a, const Json& b, bool ordered = false);

class JsonSchema {
 public:
  // Every error found (empty on success) when compiling `schema`.
  static Result<JsonSchema> compile(const Json& schema, SchemaUse use = SchemaUse::generation,
                                    std::vector<SchemaError>* errors = nullptr);
  // Parses JSON text (keeping key order) and compiles it.
  static Result<JsonSchema> parse(std::string_view text, SchemaUse use = SchemaUse::generation,
                                  std::vector<SchemaError>* errors = nullptr);
  // For callers holding nlohmann::json (keys sorted: generation order is then the
  // alphabetical one).
  static Result<JsonSchema> compile(const nlohmann::json& schema, SchemaUse use = SchemaUse::generation,
                                    std::vector<SchemaError>* errors = nullptr);

  // Errors (empty: valid), at most options.max_errors of them.
  std::vector<SchemaError> validate(const Json& value, const ValidateOptions& options = {}) const;
  bool is_valid(const Json& value, const ValidateOptions& options = {}) const;
  std::vector<SchemaError> validate(const nlohmann::json& value, const ValidateOptions& options = {}) const;
  // Validates `value` against one node (used to filter enum values by sibling keywords).
  bool is_valid_at(NodeId node, const Json& value, const ValidateOptions& options = {}) const;

  const SchemaNode& node(NodeId id) const { return nodes_->at(std::size_t(id)); }
  std::size_t num_nodes() const { return nodes_->size(); }
  NodeId root() const { return 0; }
  SchemaUse use() const { return use_; }
  const Json& document() const { return *document_; }

 private:
  friend class SchemaCompiler;
  std::shared_ptr<const std::vector<SchemaNode>> nodes_;
  std::shared_ptr<const Json> document_;
  SchemaUse use_ = SchemaUse::generation;
};

}  // namespace arbor::model
