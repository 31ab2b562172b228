"""The ``tfidf`` retriever: cosine similarity of TF-IDF weights over lower-cased words."""

import math
import re
from collections import Counter

WORD = re.compile(r"\w+")


class TfidfRetriever:
    def __init__(self, options):  # a TfidfOptions, validated: options.sublinear, options.min_df
        self.sublinear, self.min_df = options.sublinear, options.min_df

    def index(self, corpus, *, task, context):  # once per task, before its searches
        df = Counter(t for text in corpus.texts for t in set(WORD.findall(text.lower())))
        self.idf = {t: math.log(len(corpus) / n) + 1 for t, n in df.items() if n >= self.min_df}
        self.ids = corpus.ids
        self.docs = [self._weights(t) for t in corpus.texts]

    def search(self, queries, *, task, top_k, context):  # -> {query id: {document id: score}}
        out = {}
        for q in queries:
            qw = self._weights(q.text)
            out[q.id] = {d: sum(v * dw.get(t, 0.0) for t, v in qw.items()) for d, dw in zip(self.ids, self.docs)}
        return out  # every document's score: the harness keeps the top_k best

    def model_meta(self):  # optional: the model's name and revision, which name the results folder
        return {"name": "example/tfidf", "revision": "0.3.0"}

    def _weights(self, text):  # word -> weight, scaled to length 1
        tf = Counter(WORD.findall(text.lower()))
        w = {t: (1 + math.log(c) if self.sublinear else c) * self.idf.get(t, 0.0) for t, c in tf.items()}
        norm = math.sqrt(sum(v * v for v in w.values())) or 1.0
        return {t: v / norm for t, v in w.items()}
