// EnableSentencePiece: makes SentencePiece tokenizers available in this
// program. Link hlab::data_sentencepiece and call it once at start-up,
// before any tokenizer is made.
//
// Only programs that load neither LibTorch nor gRPC may do this: Debian's
// libsentencepiece embeds and exports its own protobuf-lite, which clashes
// with the libprotobuf those load (the process crashes at start-up). So
// hlab-data prepares SentencePiece datasets; hlab-train reads their shards,
// which hold token ids and need no tokenizer.
//
// Thread-safety: call before starting threads.
//
//   int main(int argc, char** argv) {
//     hlab::data::EnableSentencePiece();
//     return hlab::data::RunDataCommand(argc, argv);
//   }
#ifndef HLAB_DATA_SENTENCEPIECE_SUPPORT_H_
#define HLAB_DATA_SENTENCEPIECE_SUPPORT_H_

namespace hlab::data {

void EnableSentencePiece();

}  // namespace hlab::data

#endif  // HLAB_DATA_SENTENCEPIECE_SUPPORT_H_
