/* Text for character models: strict UTF-8 (sn_utf8_validate against a decode loop), the
 * vocabulary (every character of valid text has an id that decodes back to its bytes), the
 * text dataset over it (byte 0 picks the sequence length, bytes mode and batch size), and
 * sn_vocab_load on the same bytes as a JSON file. */
#include <string.h>

#include "fuzz_util.h"
#include "sinter/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t ctl = data[0];
    const uint8_t *text = data + 1;
    const size_t n = size - 1;
    size_t bad = (size_t)-1, pos = 0;
    bool valid = sn_utf8_validate(text, n, &bad);
    uint32_t cp;
    while (pos < n && sn_utf8_decode(text, n, &pos, &cp)) {
        char enc[4];
        int k = sn_utf8_encode(cp, enc);
        if (k < 1 || memcmp(enc, text + pos - (size_t)k, (size_t)k) != 0) abort(); /* round trip */
    }
    if (valid != (pos == n) || (!valid && bad != pos)) abort(); /* validate == decode loop */

    const bool bytes = ctl & 1;
    sn_vocab *v = NULL;
    if (sn_vocab_build(&v, text, n, bytes) == SN_OK) {
        int32_t *ids = NULL;
        int64_t m = 0;
        if (sn_vocab_encode(v, text, n, &ids, &m) != SN_OK) abort(); /* its own text encodes */
        size_t off = 0;
        for (int64_t i = 0; i < m; i++) { /* and decodes back to the same bytes */
            char c[4];
            int k = sn_vocab_decode(v, ids[i], c);
            if (k < 1 || off + (size_t)k > n || memcmp(c, text + off, (size_t)k) != 0) abort();
            off += (size_t)k;
        }
        if (off != n) abort();
        free(ids);
        sn_vocab_free(v);
    } else if (v) {
        abort();
    }

    sn_text_opts o = sn_text_defaults();
    o.seq_length = 1 + (ctl >> 4);
    o.batch_size = (ctl >> 1) & 3;
    o.shuffle_buffer = 8;
    o.bytes = bytes;
    o.validation_split = (ctl & 8) ? 0.25 : 0;
    o.prefetch = 0;
    sn_dataset *tr = NULL, *va = NULL;
    sn_text_info info;
    if (sn_text_dataset_from_memory(text, n, "fuzz.txt", &o, &v, &tr, &va, &info) == SN_OK) {
        int64_t count = 0;
        for (;;) {
            sn_tensor *b[2];
            bool end = false;
            if (sn_dataset_next(tr, b, &end) != SN_OK) abort();
            if (end) break;
            const int32_t *x = sn_tensor_cdata(b[0]);
            for (int64_t i = 0; i < sn_tensor_numel(b[0]); i++)
                if (x[i] < 0 || x[i] >= sn_vocab_size(v)) abort(); /* ids inside the vocabulary */
            count++;
        }
        int64_t want = o.batch_size ? info.n_train / o.batch_size : info.n_train;
        if (count != want) abort();
        sn_dataset_free(tr);
        sn_dataset_free(va);
        sn_vocab_free(v);
    }

    sn_vocab *j = NULL;
    if (sn_vocab_load(&j, fuzz_file(text, n)) != SN_OK && j) abort();
    sn_vocab_free(j);
    return 0;
}
