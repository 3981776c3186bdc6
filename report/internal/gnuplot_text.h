// Shared pieces of the report's gnuplot scripts and data files: colours,
// exact numbers, string literals, file names, the script header, and the
// Plot record. For report/plots.cc, mechanism_figures.cc,
// comparison_figures.cc and multiple_choice_figures.cc only.
//
// Thread-safety: pure functions (WriteText writes one file).
#ifndef HLAB_REPORT_INTERNAL_GNUPLOT_TEXT_H_
#define HLAB_REPORT_INTERNAL_GNUPLOT_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "report/plots.h"

namespace hlab::report::internal {

// The i-th colour of a fixed palette (cycling).
std::string Color(size_t i);
// A number for a script or data file, exactly ("NaN" when not finite).
std::string G(double v);
// A gnuplot string literal (double quotes; enhanced-text specials escaped
// so names like "swa_32" print as written).
std::string Quote(const std::string& s);
// A file-name-safe form of an architecture name.
std::string FileSafe(const std::string& s);
// Writes `text` to `path`; Internal naming the file when it cannot.
absl::Status WriteText(const std::string& path, const std::string& text);
// The opening of every script: terminal chosen by `fmt` (svg by default),
// the title and caption as comments.
std::string Header(const Plot& plot, int width, int height);
Plot MakePlot(std::string name, std::string target, std::string title,
              std::string caption);

}  // namespace hlab::report::internal

#endif  // HLAB_REPORT_INTERNAL_GNUPLOT_TEXT_H_
