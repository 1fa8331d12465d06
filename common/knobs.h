// The one table of rwin's RWIN_* environment variables ("knobs") and the accessor every reader
// goes through. docs/CONFIG.md documents the same table; tests/scripts/config_doc_check.py fails
// when the two differ. rwin-info prints every knob with its value and where it came from.
//
// Readers keep their own parsing rules and messages (they differ per knob: sizes, ranges, enums);
// the accessor only hands out the text and records the source, so one place knows what a process
// actually used.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rwin::knobs {

enum class Kind { Size, Int, Enum, String, Bool };
// Where a knob's value came from: the environment, the knob's default, or a field the program set
// in code (rwin::Options), which wins over the variable.
enum class Source { Default, Environment, Code };

struct Knob {
  const char* name;
  Kind kind;
  const char* default_text;  // as docs/CONFIG.md's default column says it (the check compares them)
  const char* range;         // accepted values: "1..4096", "auto|native|am", "host:port"
  const char* layer;         // who reads it: bootstrap, transport, core, log, tools
  const char* meaning;       // one line
};

std::span<const Knob> table() noexcept;
const Knob* find(std::string_view name) noexcept;
const char* kind_name(Kind k) noexcept;
const char* source_name(Source s) noexcept;

// The text of knob `name` in the environment, or nullptr when it is unset or empty (an empty
// variable counts as unset). Records Source::Environment when set. `name` must be in the table:
// reading an undeclared RWIN_* variable is a programming error (std::logic_error).
// `empty_is_unset` false: an empty value is returned as "" (the launcher's rank and size variables
// refuse an empty value rather than ignore it).
const char* env(const char* name, bool empty_is_unset = true);

// Records that the program set knob `name` in code (an rwin::Options field), with its value as text.
void set_in_code(const char* name, std::string value);

// What a process uses for each knob, in table order: recorded in code, else the environment, else
// the default text.
struct Setting {
  const Knob* knob;
  std::string value;
  Source source;
};
std::vector<Setting> settings();

// RWIN_* variables in `envp` (a NULL-terminated environ array) that are not in the table, each with
// the table's closest name (edit distance). Names under the prefixes of rwin's own test and build
// scripts (RWIN_RXE_, RWIN_NETNS_, ...: script_prefixes()) are not reported.
struct Unknown {
  std::string name;
  std::string value;
  std::string closest;
};
std::vector<Unknown> unknown_variables(char** envp);
std::span<const char* const> script_prefixes() noexcept;
// "RWIN_CHUNK_BYTE=1K is not an rwin variable; did you mean RWIN_CHUNK_BYTES?"
std::string unknown_message(const Unknown& u);
// Logs unknown_message() of each unknown variable of this process's environment as a warning
// (subsystem core), once per process: the first Context calls it.
void warn_unknown_once();

// Levenshtein distance (exposed for the tests).
size_t edit_distance(std::string_view a, std::string_view b) noexcept;

}  // namespace rwin::knobs
