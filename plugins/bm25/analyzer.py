"""Pure-Python twin of pyserini 0.21's default analyzer, ``Analyzer(get_lucene_analyzer())``.

R2MED's BM25 numbers come from gensim scoring over pyserini tokens, so reproducing them needs the
very same tokens without a JVM. pyserini 0.21.0 bundles Anserini 0.21.0 on Lucene 9.4.2, whose
``DefaultEnglishAnalyzer.newStemmingInstance("porter")`` is the chain::

    StandardTokenizer (UAX#29 word breaks, maxTokenLength 255)
    -> EnglishPossessiveFilter   (drops a trailing 's / ’s / ＇s)
    -> LowerCaseFilter           (Java Character.toLowerCase, code point by code point)
    -> StopFilter                (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET, 33 words)
    -> PorterStemFilter          (Lucene's PorterStemmer: Porter's reference code, not Snowball)

and Anserini's ``AnalyzerUtils.analyze`` drops empty terms.

The tokenizer runs Lucene's own JFlex automaton, its tables read from ``StandardTokenizerImpl`` in the
Anserini 0.21.0 jar (Apache License 2.0; see NOTICE), so word breaking matches Lucene by
construction rather than by a hand-written regex. Each distinct run of token characters is analysed
once: natural text repeats runs so heavily that the automaton only sees a small fraction of it.

Java semantics kept on purpose: lengths are counted in UTF-16 code units (the 255-unit token
window, the stemmer's length checks), and lower-casing is Java 17's simple per-code-point mapping
(no final sigma, no dotted-i expansion, letters cased only after Unicode 13 left alone).
"""

from __future__ import annotations

import base64
import bisect
import re
import zlib
from collections.abc import Callable, Iterable
from itertools import chain
from typing import TypeVar

__all__ = [
    "ANALYZER_VERSION",
    "MAX_TOKEN_LENGTH",
    "STOPWORDS",
    "LuceneEnglishAnalyzer",
    "analyze",
    "analyze_many",
    "porter_stem",
    "tokenize",
]

#: Bump whenever the token output can change: index caches are keyed by it.
ANALYZER_VERSION = "lucene-9.4.2-anserini-0.21.0-en-porter-1"

#: StandardTokenizer's default maximum token length, in UTF-16 code units.
MAX_TOKEN_LENGTH = 255

#: Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET.
STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then"
    " there these they this to was will with".split()
)

# Lucene 9.4.2 StandardTokenizerImpl, packed as zlib + base85 of:
#   n_states, n_classes, start_state (one byte each);
#   per state one byte: bits 0-1 = 0 not accepting / 1 accepts the ignore rule ([^]) / 2 accepts a
#   token rule, bit 2 = final (JFlex ZZ_ATTRIBUTE & 8);
#   n_states * n_classes bytes of next state + 1 (0 = no transition);
#   the class of U+0000 and the number of class changes as varints, then per change the code
#   point delta (varint) and the new class (byte).
_LUCENE_TABLES = (
    "c-oCuO^jSe5w7m{dR|ZW`<b12^RqLvf8+J8cX!s~wY|32x!4$t0+$GsfQ3XP5IKMZ2oM)8s|W~SMO+X>C^AT(2)OVgkt"
    "hm6MhfJF;K0ufA#nsjkhsHF_4@73`Um@I>b>gf?&|vMs+uR3h>X%2KONpmlO_T}^5ap3)N~*X9i9jfYtu-yZ93;uo#jP"
    "K>xDKJJ?7I9=#(<(Qm4a&Ua!|A)2G-rDK_!IfYw~3IF5k~X*e31F&R4|!w+b9RR}L6vqVeSxn!1>3@y_VhJfQI5m-rNu"
    "u4gi&>BqwTMM?<Sj*h3#m~+O)CAk6X*NY5pn&7Y;pg~A0daHEda(6)c&GP_o|FgAsT!%CdS`~6nOV<7&(oA;+1#RBAkP"
    "J7BtM!OQ-OCuMG@WwV@FR*pw$wbk=ESghQP*#;2WD86&9Yhz?pVEY_}if&-y6^%6hU4*okNBUV@mohffb~5S)?Tk+b{M"
    "hgbTh-)Cp{F$5gDY=Fsu8PqW}7!2<B=l1>n1Z5~N<PQzu4FJ*3&JMzEOe1(@WJV*N903K$Ba>rHj?H+?0*x^QJXUCqK_"
    "bBNa(FK@RzK4^Zl}j_d+)P*gq@uyuT227wk9|uYje_0Ann9VCalV2g5TsZLvvb(=4?JRPu|aSNB48jJZ^w(3T$o)&dBD"
    "R5$fohJ}COO1h(oJ+7hgG_BIT^ZMJJ?Z*OncMqt0<vjgu6&dAOj+o{0$>c|T;olZ~A;kj5N?f;wZ&hF1yXa)<-%%z!F="
    "rYY_vpL&V=DT8MmH7_Djt|RydspWKs->MiK-&Algy`X_JjPQ?TdOjAfGYPz!n`W?>Um<44lsFOo;V0Q4-O6<RRC(X_0H"
    "Mx&j02UrL>|bQYd7KR17eHhD#VXc1Up(V|>p#WwFXDr>Fr;B^X&=)5rV@;I9!T5=w08KaFCcEDEHJW8Q`hiLwzfu51Z-"
    "Kj1b7KC!PbZ9|yxo@&h&j!*n97Vsh+K#@&H6sIxsL&<1RBgQEx9XuD=9pB9ysZ12H5Y~Q_`FV@^2FA=IwmNf=h0iNI&n"
    "mm@M;PDo9<&^@Yre_S3l~uuvpwuoper8%47Kf|k5G_3?b|NaS?c;ddr4;7mKAe2PqRF><s(_4#U?%AiExf=%-nf3v2>b"
    "ulf`+lSR$%80C#K^mP0r-Wd4|wJ_0TFG89+bD8e|wDSTRzK_bf(FI<{b`DC7p3G%STA_1|J*p78!{TtQXefrGrKhg)<="
    "#$!rEG=L8xd9t6uNdFj_gZkKM>d5f23oKzvB=W!;v;ZCPZBiX5NuH-=c=$a@p2{tw3fYPYq^hixf3$a?@cOMj%3!9`FL"
    "*k7Hm1UN3KF;?OIO<?Ih-G8?p_8#W|J|@k=b0WPe#|U_GzR@^gjCb&-(ClLBXfzL|qZj&(V1RXzx~lXXqtTIiq^4LMim"
    "F|Fd9KKL<T?^QU5&(xy9I<S&&l{IpE)~SivgM6nbb3U_?H;OoqizrtB$dgAHXGMxJ=7DS6StVMtMmy}o)}gjfiZgWx@C"
    "x4w-?azK75E+m{DuU~DqPvJ&tS~K@eiI@kQ8L>dqME9aK;<3)Z2D=Yf6P0Nv25ii^VEIc8XbEvC0~Ik2SNmz`;QCiLd0"
    "p2~Qz`d5*P|T;}p+v8m6e*gs?&f)lI&(fWM1^8Er4Q7m!XFh{Xhj!{9^5tTE)02O0U7kraa-05YXN!FSA9CEJ1@)om*a"
    "M0GFUlS7T;2V)-3g3lxxEr41FA^E=Du0zPw*96S!)VEv{I$WDHLQTPKbK)5!6nm3-pDvkg@)|6z}B(``2}fTb4vFH2|q"
    "=W*G=3(WWX4>YjVy&l=<rRW_*Le>4NXHmCtCwa>n8~aN$%V`%X&6x5ssORSX%7>{vi>c-Nr9Y5JGOi;sR5a1*fTJlI6^"
    "hO%i#*-g5uu)<-c3ApOO5L=Z?0iOZ=^Q5tZE0k0zKoq_X`wCXdRSGHjM)LK}&@OQ1nFsg}i}Je&)DDmfVb_n8olyl};-"
    "ZESv>bTz7vYK|4lXR*Oeet+4*|c5mPgT3<&ac)i_-E>N(ici@@3OQ^e(bfiDOuq-ZPvdy1Ey2KSZj_R>Zw)eHd08(SEl"
    "@->P-L)P<1U57G}*`RWCFPx<!u*kLa=>4rTEAz$S5+LFRjB3$F(*cDugrw|aQ?GITML+31V2WK^jM~?l0y@-g`_PlTNO"
    "+hwp%QX%47A(h}>p~w<k+znQ=VBay|6#VuDh64LZ<vt`n!`lQ-G+?W$VbRF=dq^BI=F=Z#bX-e#&Qg5$*+=I100+A3jU"
    "pbR%%z^*ZTekAO`+7xAy3Z?<oHXa`|!Ez~U6@nG`88h2|+zM+%WrsFCUb&VGc}?B6vi{WY9(iOxth%KK`-{e_km$$Qit"
    "+>}8xs+*^ndy}DbKrd9yLjrPKPiOb{R=#`1>(&ZIEhuyZ5sjt6NM(((ols&62$SPK$`|NexaeQutp2>RFty#|xT6)jiV"
    "M1o6E<Kj159(emqcOE^WUlRVMB-vXJEC9^s=(AY1py{+gf@_iE&xJX(-7Y5`9c^T(8jeAdiy`L%Ip$qs5|YRgr}Q3|t?"
    "FV!0%l9YKT?%91Y8DUoN4b&D`<#iawe+w@7)kjwT0aE5h6Cnw9_@FwnpEIKhyUzhuZ`?rszyMp-wr|n{b?OjO2w#W?+0"
    "yF}TTv9(baIE4fU-hoM|D4YuWsFle8CR+56r@mS?^0<tuFusgCH2bTj?XY_gn#_dR!D^wp>Boh_Qi1d0fpNDL$?)_Xmd"
    "_v5v3-rLaZ|ML#+HONIJp?f9ox`b`vaE5TAHVZ=mtbss@iP<!EJ#g3AvI7MH-ga3PHJF?$WuT`c=<CGVzitlAt7q7mNC"
    "o?!~xoSSW6-k$Z+TH(wCdO=GMb6W10<wOUb0}e3{)nVo*kJR5lcM~0T?};2?CGHww#i~>kEoH3|{#9)|IQy&GemkM(?5"
    "B{}-c<C9uKh8e*QB>r>{~Ite#5?w9*t`@_B<!2qgulx37i{KDt&4fX712W3@-1XLgyfs^_S7xaSgl{to!nz>Z;xyO?$n"
    "F7LZb3>e^3WX9ktIDx*qQ{~G95ThfU3#Ba+We1il1jmSO?M(+-PcT|W2j)^ox4IAWo=x}Tpk3%$>P%fGF2Q5LX1XdpLg"
    "#)wmbQnXS*q;|~<$#`;w4mQR=}Z?y*kEJ&qq4iuAi-(6x()Pijo9E$<;%|gnzLC#TlSq26ij`kDN>G({+Lx6!3F87+tL"
    "Wd|G3ac_pHAc>bW>rBc9{Oyca@?Vg!FvyF)a_sKqOeGhqXuUEI-V3b^5jrLH?_yMx7HPq{)mgi@#oR&)tX_p@kd+%M7U"
    "xUXqC=MEKp4qe03ZU_BFOjn%6o(7%4ciFuUG*nM;RPMD51>?`Z)wEUqe3g9p7cecK-=)0#=~ep9pu7{)-)>J~_~p^FV}"
    "(HTZ!7vA$;SC|"
)


def _read_tables() -> tuple[int, list[int], list[bool], list[list[int]], list[int], list[int]]:
    data = zlib.decompress(base64.b85decode(_LUCENE_TABLES))
    n_states, n_classes, start = data[0], data[1], data[2]
    pos = 3
    flags = data[pos : pos + n_states]
    pos += n_states
    kinds = [f & 3 for f in flags]
    final = [bool(f & 4) for f in flags]
    nxt = []
    for _ in range(n_states):
        nxt.append([b - 1 for b in data[pos : pos + n_classes]])
        pos += n_classes

    def varint() -> int:
        nonlocal pos
        value = shift = 0
        while True:
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    starts, classes = [0], [varint()]
    cp = 0
    for _ in range(varint()):
        cp += varint()
        starts.append(cp)
        classes.append(data[pos])
        pos += 1
    return start, kinds, final, nxt, starts, classes


_START, _KIND, _FINAL, _NEXT, _CLASS_STARTS, _CLASS_IDS = _read_tables()
_TOKEN = 2  # _KIND of states accepting a token rule (1: the catch-all rule that drops a character)

# Class 0 holds every character that no token rule accepts; the automaton never moves on it after
# the first character, so maximal runs of the other classes tokenize independently. Runs also take
# in every character beyond the BMP: harmless (the automaton skips class-0 ones itself) and it keeps
# the set a single bitmap plus one range, which is what makes ``re`` fast here.
_RUN_RE = re.compile(
    "["
    + "".join(
        "\\u%04x-\\u%04x" % (lo, min(hi, 0x10000) - 1)
        for lo, hi, cls in zip(_CLASS_STARTS, _CLASS_STARTS[1:] + [0x110000], _CLASS_IDS)
        if cls != 0 and lo < 0x10000
    )
    + "\\U00010000-\\U0010ffff]+"
)

_char_classes: dict[str, int] = {}


def _char_class(ch: str) -> int:
    cls = _char_classes.get(ch)
    if cls is None:
        cls = _char_classes[ch] = _CLASS_IDS[bisect.bisect_right(_CLASS_STARTS, ord(ch)) - 1]
    return cls


def _scan_run(run: str) -> list[str]:
    """StandardTokenizer over one run: longest match from each start, as JFlex does. Lucene's buffer
    is 255 UTF-16 units and never grows, so a longer word comes out in 255-unit pieces."""
    classes = [_char_class(ch) for ch in run]
    n = len(run)
    units = None
    if max(run) > "\uffff":
        units = [0]
        for ch in run:
            units.append(units[-1] + (2 if ch > "\uffff" else 1))
    tokens = []
    i = 0
    while i < n:
        if units is None:
            end = min(n, i + MAX_TOKEN_LENGTH)
        else:
            end = bisect.bisect_right(units, units[i] + MAX_TOKEN_LENGTH) - 1
        state, p, last, kind = _START, i, i, 0
        while p < end:
            state = _NEXT[state][classes[p]]
            if state < 0:
                break
            p += 1
            if _KIND[state]:
                last, kind = p, _KIND[state]
                if _FINAL[state]:
                    break
        if kind == _TOKEN:
            tokens.append(run[i:last])
        i = last
    return tokens


def _run_tokens(run: str) -> list[str]:
    # Fast path: an ASCII letter/digit run up to 255 long is exactly one token.
    if len(run) <= MAX_TOKEN_LENGTH and run.isascii() and run.isalnum():
        return [run]
    return _scan_run(run)


def tokenize(text: str) -> list[str]:
    """Tokens of Lucene's StandardTokenizer (maxTokenLength 255), before any filter."""
    tokens: list[str] = []
    for run in _RUN_RE.findall(text):
        tokens.extend(_run_tokens(run))
    return tokens


# Where Java 17's Character.toLowerCase (Unicode 13) and Python's str.lower() disagree: U+0130
# becomes a plain "i", and letters that only gained a lower-case partner after Unicode 13 stay put.
# Memoised per character; seeded with those exceptions.
_java_lower_chars: dict[str, str] = {"\u0130": "i"}
_java_lower_chars.update(
    (chr(cp), chr(cp))
    for lo, hi in (
        (0x2C2F, 0x2C2F),
        (0xA7C0, 0xA7C0),
        (0xA7D0, 0xA7D0),
        (0xA7D6, 0xA7D6),
        (0xA7D8, 0xA7D8),
        (0x10570, 0x1057A),
        (0x1057C, 0x1058A),
        (0x1058C, 0x10592),
        (0x10594, 0x10595),
    )
    for cp in range(lo, hi + 1)
)


def _java_lower_char(ch: str) -> str:
    low = _java_lower_chars.get(ch)
    if low is None:
        low = ch.lower()  # one character at a time: no final-sigma context
        _java_lower_chars[ch] = low
    return low


def _java_lower(token: str) -> str:
    if token.isascii():
        return token.lower()
    return "".join(map(_java_lower_char, token))


class _PorterStemmer:
    """Line-by-line port of Lucene 9.4's ``PorterStemmer``: Martin Porter's reference Java code, with
    its departures from the 1980 paper (``-bli`` -> ``-ble``), which Snowball's "porter" does not
    reproduce. ``b`` holds UTF-16 code units. One word's state: one stemmer per word, as threads
    stem at once (an agent's searches)."""

    __slots__ = ("b", "j", "k")

    _STEP3 = {
        "a": (("ational", "ate"), ("tional", "tion")),
        "c": (("enci", "ence"), ("anci", "ance")),
        "e": (("izer", "ize"),),
        "l": (("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")),
        "o": (("ization", "ize"), ("ation", "ate"), ("ator", "ate")),
        "s": (("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")),
        "t": (("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")),
        "g": (("logi", "log"),),
    }
    _STEP4 = {
        "e": (("icate", "ic"), ("ative", ""), ("alize", "al")),
        "i": (("iciti", "ic"),),
        "l": (("ical", "ic"), ("ful", "")),
        "s": (("ness", ""),),
    }
    _STEP5 = {
        "a": ("al",),
        "c": ("ance", "ence"),
        "e": ("er",),
        "i": ("ic",),
        "l": ("able", "ible"),
        "n": ("ant", "ement", "ment", "ent"),
        "s": ("ism",),
        "t": ("ate", "iti"),
        "u": ("ous",),
        "v": ("ive",),
        "z": ("ize",),
    }

    def stem(self, units: list[str]) -> list[str]:
        self.b, self.k, self.j = units, len(units) - 1, 0
        if self.k > 1:
            self._step1()
            self._step2()
            self._step3()
            self._step4()
            self._step5()
            self._step6()
        return self.b[: self.k + 1]

    def _cons(self, i: int) -> bool:
        ch = self.b[i]
        if ch in "aeiou":
            return False
        if ch == "y":
            return i == 0 or not self._cons(i - 1)
        return True

    def _m(self) -> int:
        """Number of vowel-consonant sequences in b[0..j]."""
        n, i, j, cons = 0, 0, self.j, self._cons
        while True:
            if i > j:
                return n
            if not cons(i):
                break
            i += 1
        i += 1
        while True:
            while True:
                if i > j:
                    return n
                if cons(i):
                    break
                i += 1
            i += 1
            n += 1
            while True:
                if i > j:
                    return n
                if not cons(i):
                    break
                i += 1
            i += 1

    def _vowel_in_stem(self) -> bool:
        return any(not self._cons(i) for i in range(self.j + 1))

    def _doublec(self, j: int) -> bool:
        return j >= 1 and self.b[j] == self.b[j - 1] and self._cons(j)

    def _cvc(self, i: int) -> bool:
        if i < 2 or not self._cons(i) or self._cons(i - 1) or not self._cons(i - 2):
            return False
        return self.b[i] not in "wxy"

    def _ends(self, s: str) -> bool:
        start = self.k - len(s) + 1
        if start < 0 or "".join(self.b[start : self.k + 1]) != s:
            return False
        self.j = self.k - len(s)
        return True

    def _setto(self, s: str) -> None:
        start = self.j + 1
        self.b[start : start + len(s)] = s
        self.k = self.j + len(s)

    def _r(self, s: str) -> None:
        if self._m() > 0:
            self._setto(s)

    def _step1(self) -> None:
        """Plurals and -ed / -ing."""
        b = self.b
        if b[self.k] == "s":
            if self._ends("sses"):
                self.k -= 2
            elif self._ends("ies"):
                self._setto("i")
            elif b[self.k - 1] != "s":
                self.k -= 1
        if self._ends("eed"):
            if self._m() > 0:
                self.k -= 1
        elif (self._ends("ed") or self._ends("ing")) and self._vowel_in_stem():
            self.k = self.j
            if self._ends("at"):
                self._setto("ate")
            elif self._ends("bl"):
                self._setto("ble")
            elif self._ends("iz"):
                self._setto("ize")
            elif self._doublec(self.k):
                if b[self.k] not in "lsz":
                    self.k -= 1
            elif self._m() == 1 and self._cvc(self.k):
                self._setto("e")

    def _step2(self) -> None:
        """Terminal y -> i when the stem has another vowel."""
        if self._ends("y") and self._vowel_in_stem():
            self.b[self.k] = "i"

    def _step3(self) -> None:
        """Double suffixes to single ones (-ization -> -ize ...)."""
        if self.k == 0:
            return
        for suffix, repl in self._STEP3.get(self.b[self.k - 1], ()):
            if self._ends(suffix):
                self._r(repl)
                return

    def _step4(self) -> None:
        """-ic-, -full, -ness ..."""
        for suffix, repl in self._STEP4.get(self.b[self.k], ()):
            if self._ends(suffix):
                self._r(repl)
                return

    def _step5(self) -> None:
        """-ant, -ence ... in context <c>vcvc<v>."""
        if self.k == 0:
            return
        ch = self.b[self.k - 1]
        if ch == "o":
            matched = (
                self._ends("ion") and self.j >= 0 and self.b[self.j] in "st"
            ) or self._ends("ou")
        else:
            matched = any(self._ends(suffix) for suffix in self._STEP5.get(ch, ()))
        if matched and self._m() > 1:
            self.k = self.j

    def _step6(self) -> None:
        """Final -e, and -ll -> -l, when m() > 1."""
        self.j = self.k
        if self.b[self.k] == "e":
            m = self._m()
            if m > 1 or (m == 1 and not self._cvc(self.k - 1)):
                self.k -= 1
        if self.b[self.k] == "l" and self._doublec(self.k) and self._m() > 1:
            self.k -= 1


_V = TypeVar("_V")


def porter_stem(word: str) -> str:
    """Lucene's Porter stem of a lower-cased term; Lucene stems UTF-16 code units, so a character
    beyond the BMP counts as two consonants."""
    if word.isascii() or max(word) <= "\uffff":
        if len(word) <= 2:
            return word
        return "".join(_PorterStemmer().stem(list(word)))
    raw = word.encode("utf-16-le")
    units = [chr(raw[i] | raw[i + 1] << 8) for i in range(0, len(raw), 2)]
    return "".join(_PorterStemmer().stem(units)).encode("utf-16-le", "surrogatepass").decode("utf-16-le")


def _term(token: str) -> str:
    """The filter chain after the tokenizer; '' when the token is dropped."""
    if len(token) >= 2 and token[-1] in "sS" and token[-2] in "'\u2019\uff07":
        token = token[:-2]
    term = _java_lower(token)
    if term in STOPWORDS:
        return ""
    return porter_stem(term)


class _Memo(dict[str, _V]):
    """A dict that fills itself from ``compute`` and forgets everything when it gets too big."""

    def __init__(self, compute: Callable[[str], _V], max_entries: int) -> None:
        super().__init__()
        self._compute = compute
        self._max_entries = max_entries

    def __missing__(self, key: str) -> _V:
        if len(self) >= self._max_entries:
            self.clear()
        value = self[key] = self._compute(key)
        return value


class LuceneEnglishAnalyzer:
    """``Analyzer(get_lucene_analyzer())`` of pyserini 0.21, token for token. ``max_cache_entries``
    bounds each memo, keeping memory flat on large corpora."""

    def __init__(self, max_cache_entries: int = 500_000) -> None:
        self._terms = _Memo(_term, max_cache_entries)
        self._runs = _Memo(self._analyze_run, max_cache_entries)

    def _analyze_run(self, run: str) -> tuple[str, ...]:
        terms = self._terms
        return tuple(term for term in map(terms.__getitem__, _run_tokens(run)) if term)

    def analyze(self, text: str) -> list[str]:
        """Index terms of ``text`` in order (pyserini's ``Analyzer.analyze``)."""
        return list(chain.from_iterable(map(self._runs.__getitem__, _RUN_RE.findall(text))))

    def analyze_many(self, texts: Iterable[str]) -> list[list[str]]:
        """``analyze`` over many texts, sharing the memo."""
        return [self.analyze(text) for text in texts]

    def clear_cache(self) -> None:
        """Drop the memos, e.g. between corpora."""
        self._terms.clear()
        self._runs.clear()


_default = LuceneEnglishAnalyzer()


def analyze(text: str) -> list[str]:
    """Index terms of ``text`` with the shared default analyzer."""
    return _default.analyze(text)


def analyze_many(texts: Iterable[str]) -> list[list[str]]:
    """Index terms of each text with the shared default analyzer."""
    return _default.analyze_many(texts)
