"""National identifiers checked with `python-stdnum`: US ITIN, UK NHS, Canadian SIN, Australian TFN and the
EU's personal ids.

Each class is a shape and stdnum's validation of it (check digits, embedded birth dates, reserved ranges).
A shape with its own punctuation (`912-90-3456`, `85.07.30-033.28`, `710319/2745`, `131052-308T`, a
spaced French NIR, an Italian codice fiscale, a Portuguese CC) is distinctive once its checksum passes.
A bare run of 9 to 13 digits is not: a 1-in-10 or 1-in-11 checksum passes for many ids and timestamps,
and several countries share a length. Those need the identifier's own name within a few words of them
("NHS", "PESEL", "BSN", "Steuer-ID", "personnummer"), on either side.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from types import ModuleType

from stdnum.at import vnr
from stdnum.au import tfn
from stdnum.be import nn
from stdnum.bg import egn
from stdnum.ca import sin
from stdnum.cz import rc
from stdnum.de import idnr
from stdnum.dk import cpr
from stdnum.ee import ik
from stdnum.fi import hetu
from stdnum.fr import nir
from stdnum.gb import nhs
from stdnum.gr import amka
from stdnum.hr import oib
from stdnum.ie import pps
from stdnum.it import codicefiscale
from stdnum.lt import asmens
from stdnum.nl import bsn
from stdnum.pl import pesel
from stdnum.pt import cc
from stdnum.ro import cnp
from stdnum.se import personnummer
from stdnum.si import emso
from stdnum.us import itin

from pipeline.scrub.checksums import ssn_valid
from pipeline.scrub.classes import CandidateCheck, PiiClass, pii_class
from pipeline.scrub.report import Policy
from pipeline.scrub.view import TextFacts

KEYWORD_BEFORE = 48
KEYWORD_AFTER = 24


def stdnum_valid(module: ModuleType) -> Callable[[str], bool]:
    """The module's `is_valid`, False for anything it raises: a validator's bug must not fail a scrub."""
    validate: Callable[[str], bool] = module.is_valid

    def valid(text: str) -> bool:
        try:
            return bool(validate(text))
        except Exception:  # stdnum catches its own errors; anything else is a bug on odd input
            return False

    return valid


def keyword_pattern(keywords: tuple[str, ...]) -> re.Pattern[str]:
    """The keywords as whole words, any case."""
    words = "|".join(re.escape(k) for k in sorted(keywords, key=len, reverse=True))
    return re.compile(rf"(?i)(?<![^\W\d_])(?:{words})(?![^\W\d_])")


def near(keyword: re.Pattern[str], view: str, start: int, end: int) -> bool:
    """True when a keyword stands within a few words before or after `view[start:end]`."""
    return (
        keyword.search(view, max(0, start - KEYWORD_BEFORE), start) is not None
        or keyword.search(view, end, end + KEYWORD_AFTER) is not None
    )


def _needles(keywords: tuple[str, ...]) -> tuple[bytes, ...]:
    # TextFacts lowers ASCII letters only, so a non-ASCII keyword is given in each case it is written in.
    return tuple(k.encode().lower() for k in keywords)


def _checked(
    valid: Callable[[str], bool], keyword: re.Pattern[str] | None, formatted: re.Pattern[str] | None
) -> CandidateCheck:
    def check(view: str, start: int, end: int, _policy: Policy) -> bool:
        text = view[start:end]
        if not valid(text):
            return False
        if keyword is None or (formatted is not None and formatted.fullmatch(text)):
            return True
        return near(keyword, view, start, end)

    return check


def _national(
    name: str,
    token: str,
    pattern: str,
    hint_tail: str,
    valid: Callable[[str], bool],
    keywords: tuple[str, ...] = (),
    formatted: str | None = None,
    *,
    digits: int,
    run: int = 1,
) -> PiiClass:
    """A class of `digits` digits at least, `run` of them consecutive, needing a keyword unless `keywords`
    is empty or the match has the `formatted` shape."""
    keyword = keyword_pattern(keywords) if keywords else None
    shape = re.compile(formatted) if formatted else None
    needles = _needles(keywords)

    def gate(facts: TextFacts) -> bool:
        return facts.digits >= digits and facts.run >= run

    def keyword_gate(facts: TextFacts) -> bool:
        return facts.has_any(needles)

    # The keyword lookup costs several substring searches: it waits until the class's hint has matched.
    late_gate = keyword_gate if keyword is not None and shape is None else None
    return pii_class(name, pattern, gate, hint_tail, _checked(valid, keyword, shape), token, late_gate=late_gate)


_SSN_WORDS = ("ssn", "social security", "social security number")
_NHS_WORDS = ("nhs", "nhs no", "nhs number")
_SIN_WORDS = ("sin", "social insurance", "nas", "assurance sociale")
_TFN_WORDS = ("tfn", "tax file", "tax file number")
_AT_WORDS = ("svnr", "sv-nr", "sv-nummer", "sozialversicherungsnummer", "versicherungsnummer", "vsnr")
_BE_WORDS = ("rijksregisternummer", "rijksregister", "numéro national", "national number", "insz", "niss")
_BG_WORDS = ("егн", "ЕГН", "egn")
_CZ_WORDS = ("rodné číslo", "rodne cislo", "rodného čísla", "rč", "RČ", "birth number")
_DE_WORDS = ("steuer-id", "steuerid", "steuer-idnr", "identifikationsnummer", "steueridentifikationsnummer", "idnr")
_DK_WORDS = ("cpr", "cpr-nr", "personnummer")
_EE_WORDS = ("isikukood", "isikukoodi", "personal code")
_FR_WORDS = ("nir", "insee", "sécurité sociale", "securite sociale", "sécu", "secu", "numéro de sécurité")
_GR_WORDS = ("amka", "αμκα", "ΑΜΚΑ")
_HR_WORDS = ("oib",)
_IE_WORDS = ("pps", "ppsn", "pps number")
_LT_WORDS = ("asmens kodas", "asmens kodo", "asmens")
_NL_WORDS = ("bsn", "burgerservicenummer", "sofinummer", "sofi-nummer")
_PL_WORDS = ("pesel",)
_RO_WORDS = ("cnp", "cod numeric personal")
_SE_WORDS = ("personnummer", "personnr", "pnr")
_SI_WORDS = ("emšo", "EMŠO", "emso")

NATIONAL_CLASSES: tuple[PiiClass, ...] = (
    # United States, United Kingdom, Canada, Australia.
    _national(
        "us_itin",
        "ITIN",
        r"\b9[0-9]{2}-[0-9]{2}-[0-9]{4}\b",
        r"[0-9]-[0-9]{2}-[0-9]{4}",
        stdnum_valid(itin),
        digits=9,
        run=4,
    ),
    _national("us_itin_bare", "ITIN", r"\b9[0-9]{8}\b", r"[0-9]{8}", stdnum_valid(itin), ("itin",), digits=9, run=9),
    _national("ssn_keyword", "SSN", r"\b[0-9]{9}\b", r"[0-9]{8}", ssn_valid, _SSN_WORDS, digits=9, run=9),
    _national(
        "gb_nhs",
        "NHS",
        r"\b[0-9]{3}[ -]?[0-9]{3}[ -]?[0-9]{4}\b",
        r"[0-9]{2}[ -]?[0-9]{3}[ -]?[0-9]{4}",
        stdnum_valid(nhs),
        _NHS_WORDS,
        digits=10,
        run=4,
    ),
    _national(
        "ca_sin",
        "SIN",
        r"\b[0-9]{3}[ -]?[0-9]{3}[ -]?[0-9]{3}\b",
        r"[0-9]{2}[ -]?[0-9]{3}[ -]?[0-9]{3}",
        stdnum_valid(sin),
        _SIN_WORDS,
        digits=9,
        run=3,
    ),
    _national(
        "au_tfn",
        "TFN",
        r"\b[0-9]{3} ?[0-9]{3} ?[0-9]{2,3}\b",
        r"[0-9]{2} ?[0-9]{3} ?[0-9]{2}",
        stdnum_valid(tfn),
        _TFN_WORDS,
        digits=8,
        run=3,
    ),
    # The European Union.
    _national(
        "at_svnr",
        "AT_SVNR",
        r"\b[0-9]{4} ?[0-9]{6}\b",
        r"[0-9]{3} ?[0-9]{6}",
        stdnum_valid(vnr),
        _AT_WORDS,
        digits=10,
        run=4,
    ),
    _national(
        "be_nn",
        "BE_NN",
        r"\b[0-9]{2}[. ]?[0-9]{2}[. ]?[0-9]{2}[ -]?[0-9]{3}[. ]?[0-9]{2}\b",
        r"[0-9][. ]?[0-9]{2}[. ]?[0-9]{2}[ -]?[0-9]{3}[. ]?[0-9]{2}",
        stdnum_valid(nn),
        _BE_WORDS,
        r"[0-9]{2}\.[0-9]{2}\.[0-9]{2}-[0-9]{3}\.[0-9]{2}",
        digits=11,
        run=3,
    ),
    _national("bg_egn", "BG_EGN", r"\b[0-9]{10}\b", r"[0-9]{9}", stdnum_valid(egn), _BG_WORDS, digits=10, run=10),
    _national(
        "cz_sk_rc",
        "RC",
        r"\b[0-9]{6}/?[0-9]{3,4}\b",
        r"[0-9]{5}/?[0-9]{3}",
        stdnum_valid(rc),
        _CZ_WORDS,
        r"[0-9]{6}/[0-9]{3,4}",
        digits=9,
        run=6,
    ),
    _national(
        "de_idnr",
        "DE_IDNR",
        r"\b[0-9]{2} ?[0-9]{3} ?[0-9]{3} ?[0-9]{3}\b",
        r"[0-9] ?[0-9]{3} ?[0-9]{3} ?[0-9]{3}",
        stdnum_valid(idnr),
        _DE_WORDS,
        digits=11,
        run=3,
    ),
    _national(
        "dk_cpr",
        "DK_CPR",
        r"\b[0-9]{6}-?[0-9]{4}\b",
        r"[0-9]{5}-?[0-9]{4}",
        stdnum_valid(cpr),
        _DK_WORDS,
        digits=10,
        run=6,
    ),
    _national("ee_ik", "EE_IK", r"\b[1-6][0-9]{10}\b", r"[0-9]{10}", stdnum_valid(ik), _EE_WORDS, digits=11, run=11),
    _national(
        "fi_hetu",
        "FI_HETU",
        r"\b[0-9]{6}[-+A-FU-Y][0-9]{3}[0-9A-Y]\b",
        r"[0-9]{5}[-+A-FU-Y][0-9]{3}",
        stdnum_valid(hetu),
        digits=9,
        run=6,
    ),
    _national(
        "fr_nir",
        "FR_NIR",
        r"\b[12] ?[0-9]{2} ?[0-9]{2} ?(?:[0-9]{2}|2[AB]) ?[0-9]{3} ?[0-9]{3} ?[0-9]{2}\b",
        r" ?[0-9]{2} ?[0-9]{2} ?(?:[0-9]{2}|2[AB]) ?[0-9]{3} ?[0-9]{3} ?[0-9]{2}",
        stdnum_valid(nir),
        _FR_WORDS,
        r".* .* .*",
        digits=13,
        run=3,
    ),
    _national("gr_amka", "GR_AMKA", r"\b[0-9]{11}\b", r"[0-9]{10}", stdnum_valid(amka), _GR_WORDS, digits=11, run=11),
    _national("hr_oib", "HR_OIB", r"\b[0-9]{11}\b", r"[0-9]{10}", stdnum_valid(oib), _HR_WORDS, digits=11, run=11),
    _national(
        "ie_pps", "IE_PPS", r"\b[0-9]{7}[A-W][ABHW]?\b", r"[0-9]{6}[A-W]", stdnum_valid(pps), _IE_WORDS, digits=7, run=7
    ),
    # The year's two digits are kept as digits: a fully omocodic code (letters for every digit) is missed.
    _national(
        "it_cf",
        "IT_CF",
        r"\b[A-Z]{6}[0-9]{2}[ABCDEHLMPRST][0-9LMNPQRSTUV]{2}[A-Z][0-9LMNPQRSTUV]{3}[A-Z]\b",
        r"[ABCDEHLMPRST][0-9LMNPQRSTUV]{2}[A-Z][0-9LMNPQRSTUV]{3}[A-Z]",
        stdnum_valid(codicefiscale),
        digits=2,
        run=2,
    ),
    _national(
        "lt_ak", "LT_AK", r"\b[1-6][0-9]{10}\b", r"[0-9]{10}", stdnum_valid(asmens), _LT_WORDS, digits=11, run=11
    ),
    _national(
        "nl_bsn",
        "NL_BSN",
        r"\b[0-9]{4}\.?[0-9]{2}\.?[0-9]{3}\b",
        r"[0-9]{3}\.?[0-9]{2}\.?[0-9]{3}",
        stdnum_valid(bsn),
        _NL_WORDS,
        digits=9,
        run=4,
    ),
    _national(
        "pl_pesel", "PL_PESEL", r"\b[0-9]{11}\b", r"[0-9]{10}", stdnum_valid(pesel), _PL_WORDS, digits=11, run=11
    ),
    _national(
        "pt_cc",
        "PT_CC",
        r"\b[0-9]{8} ?[0-9] ?[A-Z]{2}[0-9]\b",
        r"[0-9]{7} ?[0-9] ?[A-Z]{2}[0-9]",
        stdnum_valid(cc),
        digits=9,
        run=8,
    ),
    _national("ro_cnp", "RO_CNP", r"\b[1-9][0-9]{12}\b", r"[0-9]{12}", stdnum_valid(cnp), _RO_WORDS, digits=13, run=13),
    _national(
        "se_pnr",
        "SE_PNR",
        r"\b(?:[0-9]{2})?[0-9]{6}[-+]?[0-9]{4}\b",
        r"[0-9]{5}[-+]?[0-9]{4}",
        stdnum_valid(personnummer),
        _SE_WORDS,
        r"(?:[0-9]{2})?[0-9]{6}[-+][0-9]{4}",
        digits=10,
        run=6,
    ),
    _national("si_emso", "SI_EMSO", r"\b[0-9]{13}\b", r"[0-9]{12}", stdnum_valid(emso), _SI_WORDS, digits=13, run=13),
)
