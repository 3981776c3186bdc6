// The English word lists of the RULER suite (eval/ruler/ruler_tasks.h):
// adjectives and nouns for NIAH's "words" keys and values (RULER's
// "adjective-noun", from the wonderwords lists), and nouns, adjectives and
// verbs for common-words extraction. Our own lists, in the spirit of
// wonderwords': plain lower-case words, none containing another (so a
// substring match never mistakes one word for another), and none of the
// noise haystack's words ("the grass is green ...").
//
// Thread-safety: the lists are built once, on first use; safe to call from
// any thread.
//
//   const std::vector<std::string>& adjectives = RulerAdjectives();
#ifndef HLAB_EVAL_RULER_WORD_LISTS_H_
#define HLAB_EVAL_RULER_WORD_LISTS_H_

#include <string>
#include <vector>

namespace hlab::eval::ruler {

const std::vector<std::string>& RulerAdjectives();
const std::vector<std::string>& RulerNouns();
// Nouns, adjectives and verbs, sorted, without duplicates.
const std::vector<std::string>& RulerCommonWords();

// The words of RULER's noise haystack, lower-case ("the", "grass", ...).
const std::vector<std::string>& NoiseWords();

}  // namespace hlab::eval::ruler

#endif  // HLAB_EVAL_RULER_WORD_LISTS_H_
