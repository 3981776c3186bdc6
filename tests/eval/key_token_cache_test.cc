#include "eval/key_token_cache.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace hlab::eval {
namespace {

namespace fs = std::filesystem;

class KeyTokenCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hlab_key_cache_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Key tokens that differ per computation (so a hit is recognisable).
  absl::StatusOr<KeyTokens> Compute() {
    ++computed_;
    KeyTokens keys;
    keys.config = key_.config;
    keys.candidate_tokens = 100 + computed_;
    keys.documents.push_back(
        {.document = 0, .length = 90, .positions = {40, 41, computed_}});
    return keys;
  }

  absl::StatusOr<KeyTokens> Get(KeyTokenCache& cache, const KeyTokenCacheKey& k,
                                CacheOutcome* outcome) {
    return cache.GetOrCompute(
        k, [&] { return Compute(); }, &warnings_, outcome);
  }

  fs::path dir_;
  int64_t computed_ = 0;
  std::vector<std::string> warnings_;
  KeyTokenCacheKey key_{.reference_sha256 = "ab12",
                        .dataset = "cd34",
                        .documents = 8,
                        .config = {.short_context = 32, .window = 8}};
};

TEST_F(KeyTokenCacheTest, ComputesOnceAndReusesTheEntry) {
  KeyTokenCache cache(dir_.string());
  CacheOutcome outcome;
  auto first = Get(cache, key_, &outcome);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(outcome, CacheOutcome::kMiss);
  EXPECT_TRUE(fs::exists(cache.PathFor(key_)));
  KeyTokenCache reopened(dir_.string());
  auto second = Get(reopened, key_, &outcome);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(outcome, CacheOutcome::kHit);
  EXPECT_EQ(computed_, 1);
  EXPECT_EQ(KeyTokensToJson(*second), KeyTokensToJson(*first));
  EXPECT_TRUE(warnings_.empty());
  // No temporary files are left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "longppl-keys")) {
    ++files;
    EXPECT_EQ(e.path().extension(), ".json");
  }
  EXPECT_EQ(files, 1);
}

TEST_F(KeyTokenCacheTest, AnyChangedPartOfTheKeyMisses) {
  KeyTokenCache cache(dir_.string());
  CacheOutcome outcome;
  ASSERT_TRUE(Get(cache, key_, &outcome).ok());
  std::vector<KeyTokenCacheKey> changed(5, key_);
  changed[0].reference_sha256 = "ab13";
  changed[1].dataset = "cd35";
  changed[2].documents = 9;
  changed[3].config.window = 16;
  changed[4].config.alpha = 1.5;
  for (size_t i = 0; i < changed.size(); ++i) {
    EXPECT_NE(cache.PathFor(changed[i]), cache.PathFor(key_)) << i;
    ASSERT_TRUE(Get(cache, changed[i], &outcome).ok());
    EXPECT_EQ(outcome, CacheOutcome::kMiss) << i;
  }
  EXPECT_EQ(computed_, 6);
}

TEST_F(KeyTokenCacheTest, ACorruptEntryIsRecomputedWithAWarning) {
  KeyTokenCache cache(dir_.string());
  CacheOutcome outcome;
  ASSERT_TRUE(Get(cache, key_, &outcome).ok());
  const std::string path = cache.PathFor(key_);
  std::ofstream(path, std::ios::trunc) << "{\"key\": {\"trunc";
  auto again = Get(cache, key_, &outcome);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(outcome, CacheOutcome::kRecomputed);
  EXPECT_EQ(computed_, 2);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find(path), std::string::npos);
  // Rewritten: the next lookup hits.
  ASSERT_TRUE(Get(cache, key_, &outcome).ok());
  EXPECT_EQ(outcome, CacheOutcome::kHit);
  EXPECT_EQ(computed_, 2);
}

TEST_F(KeyTokenCacheTest, AnEntryOfAnotherKeyUnderThisNameIsRecomputed) {
  KeyTokenCache cache(dir_.string());
  CacheOutcome outcome;
  KeyTokenCacheKey other = key_;
  other.dataset = "ffff";
  ASSERT_TRUE(Get(cache, other, &outcome).ok());
  fs::create_directories(fs::path(cache.PathFor(key_)).parent_path());
  fs::copy_file(cache.PathFor(other), cache.PathFor(key_));
  ASSERT_TRUE(Get(cache, key_, &outcome).ok());
  EXPECT_EQ(outcome, CacheOutcome::kRecomputed);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("another key"), std::string::npos);
}

TEST_F(KeyTokenCacheTest, WithoutADirectoryEveryLookupComputes) {
  KeyTokenCache cache("");
  CacheOutcome outcome;
  ASSERT_TRUE(Get(cache, key_, &outcome).ok());
  ASSERT_TRUE(Get(cache, key_, &outcome).ok());
  EXPECT_EQ(outcome, CacheOutcome::kDisabled);
  EXPECT_EQ(computed_, 2);
  EXPECT_EQ(cache.PathFor(key_), "");
}

TEST_F(KeyTokenCacheTest, ComputeErrorsPassThroughAndStoreNothing) {
  KeyTokenCache cache(dir_.string());
  auto r = cache.GetOrCompute(
      key_,
      []() -> absl::StatusOr<KeyTokens> {
        return absl::InvalidArgumentError("no document is long enough");
      },
      &warnings_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(cache.PathFor(key_)));
}

}  // namespace
}  // namespace hlab::eval
