#include "model/config/architectures.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace hlab::model {
namespace {

absl::Status ArchError(absl::string_view name, absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat("architecture '", name, "': ", message));
}

absl::StatusOr<int64_t> ParsePositive(absl::string_view text,
                                      absl::string_view what) {
  int64_t value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be an integer, got '", text, "'"));
  }
  if (value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be > 0, got ", value));
  }
  return value;
}

// Strips `suffix` from the end of *name; true if it was there.
bool ConsumeSuffix(std::string* name, absl::string_view suffix) {
  if (!absl::EndsWith(*name, suffix)) return false;
  name->resize(name->size() - suffix.size());
  return true;
}

absl::StatusOr<std::vector<MixerSpec>> ExpandNamed(absl::string_view name,
                                                   int64_t n_layers) {
  std::string base(name);
  const bool nope = ConsumeSuffix(&base, "-nope");
  const bool sparse = ConsumeSuffix(&base, "-1to3");
  const bool headwise = ConsumeSuffix(&base, "-headwise");
  const bool mha = ConsumeSuffix(&base, "-mha");
  const bool conv = ConsumeSuffix(&base, "-conv");
  MixerSpec full;
  full.kind = MixerKind::kFull;
  full.nope = nope;

  if (base == "full") {
    if (sparse || headwise || mha || conv) {
      return ArchError(name, "full has no efficient layers to vary");
    }
    return std::vector<MixerSpec>(n_layers, full);
  }
  MixerSpec efficient;
  if (absl::StartsWith(base, "swa-")) {
    auto window = ParsePositive(base.substr(4), "window");
    if (!window.ok()) return ArchError(name, window.status().message());
    efficient.kind = headwise ? MixerKind::kHeadwiseSlidingWindow
                              : MixerKind::kSlidingWindow;
    efficient.window = *window;
  } else if (base == "lightning") {
    efficient.kind = MixerKind::kLightning;
  } else if (base == "mamba2") {
    efficient.kind = MixerKind::kMamba2;
  } else if (base == "gdn") {
    efficient.kind = MixerKind::kGatedDeltaNet;
    efficient.gdn_mha = mha;
  } else {
    return ArchError(name,
                     "unknown name; known: full, swa-<window>, lightning, "
                     "mamba2, gdn, with optional -headwise (swa), -conv "
                     "(mamba2, gdn), -mha (gdn), -1to3 and -nope suffixes, "
                     "or a pattern such as 'swa:128,full'");
  }
  if (mha && efficient.kind != MixerKind::kGatedDeltaNet) {
    return ArchError(name, "-mha applies to gdn only");
  }
  if (conv && efficient.kind != MixerKind::kMamba2 &&
      efficient.kind != MixerKind::kGatedDeltaNet) {
    return ArchError(name, "-conv applies to mamba2 and gdn only");
  }
  efficient.short_conv = conv;
  if (headwise && efficient.kind != MixerKind::kHeadwiseSlidingWindow) {
    return ArchError(name, "-headwise applies to swa-<window> only");
  }
  if (headwise) {
    if (sparse)
      return ArchError(name, "-headwise cannot be combined with -1to3");
    // Every layer is head-wise: half of its heads windowed, half full.
    efficient.nope = nope;
    return std::vector<MixerSpec>(n_layers, efficient);
  }
  const int64_t period = sparse ? 4 : 2;
  if (n_layers % period != 0) {
    return ArchError(name, absl::StrCat("needs n_layers divisible by ", period,
                                        ", got ", n_layers));
  }
  std::vector<MixerSpec> layers;
  for (int64_t i = 0; i < n_layers; ++i) {
    layers.push_back(i % period == period - 1 ? full : efficient);
  }
  return layers;
}

}  // namespace

std::vector<std::string> PaperArchitectureNames() {
  return {
      "full",   "swa-128", "swa-512",      "swa-2048",         "lightning",
      "mamba2", "gdn",     "swa-128-1to3", "swa-128-headwise", "swa-128-nope"};
}

absl::StatusOr<MixerSpec> ParseLayerSpec(absl::string_view text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  auto kind = ParseMixerKind(parts[0]);
  if (!kind.ok()) return kind.status();
  MixerSpec spec;
  spec.kind = *kind;
  size_t next = 1;
  if (spec.kind == MixerKind::kSlidingWindow ||
      spec.kind == MixerKind::kHeadwiseSlidingWindow) {
    if (parts.size() < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer '", text, "': ", parts[0],
                       " needs a window, e.g. ", parts[0], ":128"));
    }
    auto window = ParsePositive(parts[1], "window");
    if (!window.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer '", text, "': ", window.status().message()));
    }
    spec.window = *window;
    next = 2;
    if (spec.kind == MixerKind::kHeadwiseSlidingWindow && parts.size() > 2 &&
        parts[2] != "nope") {
      auto heads = ParsePositive(parts[2], "windowed heads");
      if (!heads.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("layer '", text, "': ", heads.status().message()));
      }
      spec.windowed_heads = *heads;
      next = 3;
    }
  }
  for (size_t i = next; i < parts.size(); ++i) {
    const std::string& opt = parts[i];
    int64_t value = 0;
    if (opt == "nope") {
      spec.nope = true;
    } else if (opt == "conv") {
      spec.short_conv = true;
    } else if (opt == "mha") {
      spec.gdn_mha = true;
    } else if (absl::StartsWith(opt, "state=") &&
               absl::SimpleAtoi(opt.substr(6), &value)) {
      spec.ssm_state = value;
    } else if (absl::StartsWith(opt, "dim=") &&
               absl::SimpleAtoi(opt.substr(4), &value)) {
      // The head dimension of the recurrent mixer: GDN's dk = dv, Mamba-2's
      // P (which must divide its inner width: tiny models need a small one).
      if (spec.kind == MixerKind::kMamba2) {
        spec.ssm_head_dim = value;
      } else {
        spec.gdn_head_dim = value;
      }
    } else if (absl::StartsWith(opt, "chunk=") &&
               absl::SimpleAtoi(opt.substr(6), &value)) {
      spec.chunk = value;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("layer '", text, "': unknown option '", opt, "'"));
    }
  }
  return spec;
}

absl::StatusOr<std::vector<MixerSpec>> ExpandArchitecture(
    absl::string_view name, int64_t n_layers) {
  if (name.empty()) {
    return absl::InvalidArgumentError("architecture: the name is empty");
  }
  if (n_layers <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("n_layers: must be > 0, got ", n_layers));
  }
  if (n_layers > kMaxLayers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "n_layers: must be at most ", kMaxLayers, ", got ", n_layers));
  }
  // A name without ':' or ',' is a named architecture ("lightning" is the
  // 1:1 hybrid); anything else is a pattern ("lightning,full").
  if (!absl::StrContains(name, ':') && !absl::StrContains(name, ',')) {
    return ExpandNamed(name, n_layers);
  }
  std::vector<MixerSpec> unit;
  for (absl::string_view part : absl::StrSplit(name, ',')) {
    if (part.empty()) return ArchError(name, "empty layer in the pattern");
    auto spec = ParseLayerSpec(part);
    if (!spec.ok()) return ArchError(name, spec.status().message());
    unit.push_back(*spec);
  }
  if (n_layers % static_cast<int64_t>(unit.size()) != 0) {
    return ArchError(
        name, absl::StrCat("pattern of ", unit.size(),
                           " layers does not divide n_layers = ", n_layers));
  }
  std::vector<MixerSpec> layers;
  for (int64_t i = 0; i < n_layers; ++i)
    layers.push_back(unit[i % unit.size()]);
  return layers;
}

std::string LayerSpecToString(const MixerSpec& spec) {
  const MixerSpec d;
  std::string out(MixerKindName(spec.kind));
  if (spec.window > 0) absl::StrAppend(&out, ":", spec.window);
  if (spec.windowed_heads > 0) absl::StrAppend(&out, ":", spec.windowed_heads);
  if (spec.nope) absl::StrAppend(&out, ":nope");
  if (spec.short_conv) absl::StrAppend(&out, ":conv");
  if (spec.ssm_state != d.ssm_state) {
    absl::StrAppend(&out, ":state=", spec.ssm_state);
  }
  if (spec.kind == MixerKind::kMamba2 && spec.ssm_head_dim != d.ssm_head_dim) {
    absl::StrAppend(&out, ":dim=", spec.ssm_head_dim);
  }
  if (spec.gdn_head_dim != 0) absl::StrAppend(&out, ":dim=", spec.gdn_head_dim);
  if (spec.gdn_mha) absl::StrAppend(&out, ":mha");
  if (spec.chunk != 0) absl::StrAppend(&out, ":chunk=", spec.chunk);
  return out;
}

std::string LayersToPattern(const std::vector<MixerSpec>& layers) {
  std::vector<std::string> parts;
  for (const MixerSpec& spec : layers) parts.push_back(LayerSpecToString(spec));
  return absl::StrJoin(parts, ",");
}

}  // namespace hlab::model
