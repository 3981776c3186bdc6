#include "report/internal/gnuplot_text.h"

#include <cmath>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hlab::report::internal {
namespace {

constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                   "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                                   "#bcbd22", "#17becf", "#000000", "#aec7e8",
                                   "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5"};

}  // namespace

std::string Color(size_t i) {
  return kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
}

// A number for a script or data file, exactly.
std::string G(double v) {
  if (!std::isfinite(v)) return "NaN";
  return absl::StrFormat("%.17g", v);
}

// A gnuplot string literal (double quotes; enhanced-text specials escaped
// so names like "swa_32" print as written).
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '_' || c == '^' || c == '@' || c == '&' || c == '{' || c == '}') {
      out += "\\\\";
    }
    out += c;
  }
  return out + "\"";
}

// A file-name-safe form of an architecture name.
std::string FileSafe(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '-' || c == '.';
    out += ok ? c : '_';
  }
  return out;
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) {
    return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

std::string Header(const Plot& plot, int width, int height) {
  return absl::StrCat(
      "# hlab report: ", plot.title, "\n# ", plot.caption,
      "\n# Re-run from this directory: gnuplot ", plot.name,
      ".gp (SVG); gnuplot -e 'fmt=\"png\"' ", plot.name, ".gp (PNG).\n",
      "if (!exists(\"fmt\")) fmt = \"svg\"\n", "if (fmt eq \"png\") {\n",
      "  set terminal pngcairo size ", width, ",", height,
      " font \"sans,10\"\n  set output \"", plot.name, ".png\"\n} else {\n",
      "  set terminal svg size ", width, ",", height,
      " font \"sans,11\" background \"white\"\n  set output \"", plot.name,
      ".svg\"\n}\n", "set grid lc rgb \"#dddddd\"\nset border lw 1.2\n",
      "set key top right box opaque samplen 2 font \",9\"\n",
      "set datafile missing \"NaN\"\n");
}

Plot MakePlot(std::string name, std::string target, std::string title,
              std::string caption) {
  Plot plot;
  plot.name = std::move(name);
  plot.target = std::move(target);
  plot.title = std::move(title);
  plot.caption = std::move(caption);
  return plot;
}

}  // namespace hlab::report::internal
