#include "data/corpus.h"
