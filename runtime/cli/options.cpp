#include "runtime/cli/options.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <sstream>

namespace arbor::cli {
namespace {

bool parse_integer(const std::string& text, long long& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return !text.empty() && ec == std::errc() && ptr == end;
}

std::string range_text(long long min, long long max) { return std::to_string(min) + ".." + std::to_string(max); }

std::string number_text(double d) {
  std::ostringstream s;
  s << d;
  return s.str();
}

}  // namespace

CLI::Validator integer_in(long long min, long long max) {
  const std::string range = range_text(min, max);
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        long long n = 0;
        if (!parse_integer(value, n) || n < min || n > max)
          return "expects an integer in " + range + ", got '" + value + "'";
        return {};
      },
      "in " + range);
}

CLI::Validator number_in(double min, double max) {
  const std::string range = number_text(min) + ".." + number_text(max);
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        char* end = nullptr;
        const double d = std::strtod(value.c_str(), &end);
        if (value.empty() || *end != '\0' || !std::isfinite(d) || d < min || d > max)
          return "expects a number in " + range + ", got '" + value + "'";
        return {};
      },
      "in " + range);
}

CLI::Validator one_of(std::vector<std::string> names) {
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : "|") + n;
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        for (const auto& n : names)
          if (value == n) return {};
        return "expects one of " + list + ", got '" + value + "'";
      },
      list);
}

CLI::Validator integer_list_in(int min, int max) {
  const std::string range = range_text(min, max);
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        std::stringstream in(value);
        int count = 0;
        for (std::string item; std::getline(in, item, ',');) {
          long long n = 0;
          if (!parse_integer(item, n) || n < min || n > max)
            return "expects a comma list of integers in " + range + ", got '" + item + "' in '" + value + "'";
          ++count;
        }
        if (count == 0) return "expects at least one integer in " + range;
        return {};
      },
      "list in " + range);
}

std::vector<int> parse_integer_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    long long n = 0;
    if (parse_integer(item, n)) out.push_back(int(n));
  }
  return out;
}

namespace {

// Help lines read "--threads N   engine threads (0 = all cores) [in 0..4096, default 0]":
// the value's name after the flag, its check and default after the meaning.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    if (opt->get_type_size() == 0) return "";
    std::string out = " " + value_name(opt);
    if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
    if (opt->get_required()) out += " (required)";
    return out;
  }
  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string notes = check_text(opt);
    if (!opt->get_default_str().empty()) notes += (notes.empty() ? "" : ", ") + ("default " + opt->get_default_str());
    return opt->get_description() + (notes.empty() ? "" : " [" + notes + "]");
  }

 private:
  // get_type_name() is "N:in 0..4096": the value's name, then each check's text.
  static std::string value_name(const CLI::Option* opt) {
    const std::string full = opt->get_type_name();
    return full.substr(0, full.find(':'));
  }
  static std::string check_text(const CLI::Option* opt) {
    const std::string full = opt->get_type_name();
    const auto colon = full.find(':');
    return colon == std::string::npos ? "" : full.substr(colon + 1);
  }
};

}  // namespace

void configure_app(CLI::App& app) {
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  auto formatter = std::make_shared<HelpFormatter>();
  formatter->column_width(30);
  app.formatter(formatter);
}

}  // namespace arbor::cli
