// The RULER suite's word lists (eval/ruler/word_lists.h).
#include "eval/ruler/word_lists.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"

namespace hlab::eval::ruler {
namespace {

constexpr char kAdjectives[] =
    "able absent acidic active adept agile alert amber ample angry ancient "
    "anxious arctic arid aromatic ashen awake awkward bald barren bashful "
    "bitter bleak blind bold bony brave breezy brief bright brisk broad "
    "brittle bumpy busy calm candid careful cheap cheerful chilly chubby civil "
    "clever cloudy clumsy coarse cold comic cosmic costly cozy crafty crisp "
    "crooked cruel curly curvy cute damp dapper dark dear deep dense dizzy "
    "drowsy dry dull dusty eager early earnest easy elated elegant empty "
    "equal exotic faint fair fancy fast fearless feeble fierce filthy firm "
    "flat fluffy foggy fond frail frank fresh frosty frugal funny fuzzy "
    "gentle giant glad gloomy glossy golden graceful grand greasy grim gritty "
    "grumpy handy happy hardy harsh hasty hazy heavy hollow honest hungry icy "
    "idle jolly jovial juicy keen kind lame lanky large lavish lazy lean "
    "livid lonely loud lovely loyal lucky lumpy mad mellow merry messy mild "
    "misty modest moist muddy murky mushy narrow nasty neat nervous nimble "
    "noble noisy odd oily orange pale patient perky petite plain plump "
    "polite proud purple quaint quick quiet rapid rare raw ripe rocky rosy "
    "rough round royal rusty sad salty sandy scary secret shaggy shiny short "
    "shy silent silky silly simple sleepy slim slow smart smoky smooth soft "
    "soggy solid sour spicy spotty stale steady steep sticky stormy strict "
    "sturdy subtle sunny super sweet swift tall tame tart tender tense "
    "thirsty tidy tiny tough tricky ugly vast violet vivid wary warm weary "
    "wet white wicked wide wild windy wise witty wooden young zany zealous";

constexpr char kNouns[] =
    "acorn actor airport alley anchor ankle apple apron arrow attic avenue "
    "badge bagel bakery balloon banana banjo barn basket beacon beard bed "
    "bell bench berry bicycle blanket blossom bonnet bottle boulder bracelet "
    "bridge broom bucket buffalo bunny butter button cabin cactus camel "
    "camera canal candle canoe canyon carpet carrot castle cat cellar chair "
    "cherry chimney circus cliff clock cloud coat cobra coffee comet copper "
    "cottage cousin cradle crayon cricket crown cup curtain daisy desk "
    "diamond dinner doctor dolphin donkey dragon drum eagle elbow engine "
    "falcon feather fence ferry fiddle finger fjord flute forest fossil fox "
    "frog galaxy garden garlic giraffe glacier glove goat guitar hammer "
    "harbor harp helmet hippo honey horse island jacket jaguar jelly jungle "
    "kettle kitten kiwi ladder lagoon lamp lantern lemon leopard library "
    "lizard llama lobster locket magnet mango maple marble meadow melon "
    "mirror monkey moose mountain muffin museum mushroom needle nest noodle "
    "notebook oasis ocean octopus olive onion orchard ostrich otter owl "
    "paddle palace panda parrot peach peanut pebble pelican pencil penguin "
    "pepper piano pickle pigeon pillow pirate planet plum pocket pony potato "
    "puddle pumpkin puppet puzzle quilt rabbit raccoon radio raven ribbon "
    "river robot rocket saddle salmon sandal scarf scooter sheep shovel "
    "singer skate sled snail sofa spider spoon squirrel statue stove "
    "student sugar suitcase swan sweater table teapot tiger toaster tomato "
    "tractor trumpet tulip tunnel turtle umbrella valley vase violin wagon "
    "walrus wallet whale whistle window wizard yacht zebra";

constexpr char kVerbs[] =
    "admire argue bake borrow breathe build carry chase chew climb collect "
    "cook crawl dance deliver dig dream drink drive earn explore fetch float "
    "fold gather giggle glide grab guess hike hop hug hunt invent jog juggle "
    "kneel knit laugh lend listen march mend mix nibble obey paint pedal "
    "plant pour pray pull punch push question quit read relax repair rescue "
    "ride roar rush scream search sew shiver shout sing skip sleep slide "
    "sneeze speak spill squeeze stir study swim swing teach throw tickle "
    "travel trust tumble type unfold vanish visit wander wash whisper wink "
    "wobble worry yawn yell zoom";

constexpr char kNoise[] =
    "the grass is green the sky is blue the sun is yellow here we go there "
    "and back again";

std::vector<std::string> Words(const char* text) {
  std::vector<std::string> words = absl::StrSplit(text, ' ');
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  return words;
}

// `words` without those that contain, or lie inside, another word of `all`
// or lie inside the noise text.
std::vector<std::string> Clean(const std::vector<std::string>& words,
                               const std::vector<std::string>& all) {
  const std::string noise(kNoise);
  std::vector<std::string> out;
  for (const std::string& w : words) {
    bool clash = noise.find(w) != std::string::npos;
    for (const std::string& o : all) {
      clash = clash || (o != w && (o.find(w) != std::string::npos ||
                                   w.find(o) != std::string::npos));
    }
    if (!clash) out.push_back(w);
  }
  return out;
}

struct Lists {
  std::vector<std::string> adjectives, nouns, common, noise;
  Lists() {
    std::vector<std::string> all = Words(kAdjectives);
    for (const char* t : {kNouns, kVerbs}) {
      std::vector<std::string> w = Words(t);
      all.insert(all.end(), w.begin(), w.end());
    }
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    adjectives = Clean(Words(kAdjectives), all);
    nouns = Clean(Words(kNouns), all);
    common = Clean(all, all);
    noise = Words(kNoise);
  }
};

const Lists& TheLists() {
  static const Lists* lists = new Lists();
  return *lists;
}

}  // namespace

const std::vector<std::string>& RulerAdjectives() {
  return TheLists().adjectives;
}
const std::vector<std::string>& RulerNouns() { return TheLists().nouns; }
const std::vector<std::string>& RulerCommonWords() { return TheLists().common; }
const std::vector<std::string>& NoiseWords() { return TheLists().noise; }

}  // namespace hlab::eval::ruler
