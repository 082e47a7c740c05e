// JSON Schema `pattern` (an ECMA-262 regular expression) compiled to a CharDfa.
//
// Semantics: as JSON Schema says, a pattern is *searched* in the string (not anchored):
// each top-level alternative without a leading `^` may start anywhere, and one without
// a trailing `$` may end anywhere. Matching is over code points (as with ECMA's `u`
// flag), so `.` is one code point, never half a surrogate pair.
//
// Supported: literals (UTF-8), `.`, classes `[...]`/`[^...]` with ranges, `\d \D \w \W
// \s \S`, escapes (`\t \n \r \f \v \0 \xHH \uHHHH \u{H..} \cX`, escaped punctuation),
// groups `(...)`, `(?:...)`, `(?<name>...)`, alternation `|`, quantifiers `* + ? {n}
// {n,} {n,m}` (lazy `?` suffix accepted: the matched language is the same), and `^`/`$`
// at the start/end of a top-level alternative.
// Rejected with an error naming the construct and its offset: backreferences,
// lookaround, `\b`/`\B`, `\p{..}`, anchors elsewhere, and patterns whose automaton
// would exceed the size limit.
#pragma once

#include <string_view>

#include "common/result.hpp"
#include "model/char_dfa.hpp"

namespace arbor::model {

// The DFA accepts (label 0) exactly the strings in which `pattern` is found.
Result<CharDfa> compile_pattern(std::string_view pattern);

}  // namespace arbor::model
