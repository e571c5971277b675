"""National identifiers checked with `python-stdnum`: US ITIN and SSN, UK NHS, Canadian SIN, Australian TFN
and the EU's personal ids.

Each class is a shape and stdnum's validation of it (check digits, embedded birth dates, reserved ranges).
A shape with its own punctuation (`912-90-3456`, `85.07.30-033.28`, `710319/2745`, `131052-308T`, a
spaced French NIR, an Italian codice fiscale, a Portuguese CC) is distinctive once its checksum passes;
so are the ITIN in any one separator (`912 70 1234`), the dashed SIN (`752-174-888`) and the NHS number
as the NHS prints it (`592 841 3823`, `592-841-3823`; not a valid North American phone, which the phone
class takes), unless the text names them otherwise (`naming`) or another number stands right beside them
(a list). Three groups of three digits with spaces are not distinctive: lists (`ports 443 587 993`) and
thousands (`123 456 789 bytes`) are written so, and a spaced SIN or TFN needs its name. Neither is a bare
run of 8 to 13 digits, or digits grouped as nobody writes the id: those need the identifier's own name
within a few words of them ("NHS", "TFN", "PESEL", "BSN", "Steuer-ID", "personnummer"), on either side.

A candidate that fails its check while its name stands beside it is kept whole (`PiiClass.shield`): "SIN
046 454 287" is no phone either.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum

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
from stdnum.us import itin, ssn

from pipeline.scrub.classes import CandidateCheck, PiiClass, pii_class
from pipeline.scrub.naming import (
    digits_valid,
    in_a_list,
    keyword_pattern,
    named_otherwise,
    near,
    needles,
    stdnum_valid,
)
from pipeline.scrub.phones import nanp_valid
from pipeline.scrub.report import Policy
from pipeline.scrub.view import TextFacts

Valid = Callable[[str], bool]


class Kept(Enum):
    """When a candidate that fails its check is kept from the other classes."""

    NEVER = "never"
    NAMED = "named"  # the id's name stands beside it


def _checked(
    valid: Valid,
    keyword: re.Pattern[str] | None,
    formatted: re.Pattern[str] | None,
    rival: re.Pattern[str] | None,
    unnamed: Valid | None,
) -> CandidateCheck:
    def check(view: str, start: int, end: int, _policy: Policy) -> bool:
        text = view[start:end]
        if not valid(text):
            return False
        if keyword is None or near(keyword, view, start, end):
            return True
        if formatted is None or not formatted.fullmatch(text):
            return False
        if rival is not None and near(rival, view, start, end):
            return False
        if named_otherwise(view, start) or in_a_list(view, start, end):
            return False
        return unnamed is None or unnamed(text)

    return check


def _named(keyword: re.Pattern[str], claimed: Valid | None) -> CandidateCheck:
    """A failing candidate beside the id's name is kept, unless another class claims it (`claimed`)."""

    def shield(view: str, start: int, end: int, _policy: Policy) -> bool:
        return near(keyword, view, start, end) and not (claimed is not None and claimed(view[start:end]))

    return shield


def _national(
    name: str,
    token: str,
    pattern: str,
    hint_tail: str,
    valid: Valid,
    keywords: tuple[str, ...] = (),
    formatted: str | None = None,
    *,
    digits: int,
    run: int = 1,
    rivals: tuple[str, ...] = (),
    unnamed: Valid | None = None,
    kept: Kept = Kept.NEVER,
    claimed: Valid | None = None,
) -> PiiClass:
    """A class of `digits` digits at least, `run` of them consecutive, needing a keyword unless `keywords`
    is empty or the match has the `formatted` shape; a formatted match without its name must also pass
    `unnamed`, and is refused when a `rivals` name stands beside it. Under `Kept.NAMED` a candidate that
    fails beside its name is kept from the other classes, unless `claimed` says another class's it is."""
    keyword = keyword_pattern(keywords) if keywords else None
    shape = re.compile(formatted) if formatted else None
    rival = keyword_pattern(rivals) if rivals else None
    keyword_needles = needles(keywords)

    def gate(facts: TextFacts) -> bool:
        return facts.digits >= digits and facts.run >= run

    def keyword_gate(facts: TextFacts) -> bool:
        return facts.has_any(keyword_needles)

    # The keyword lookup costs several substring searches: it waits until the class's hint has matched.
    late_gate = keyword_gate if keyword is not None and shape is None else None
    check = _checked(valid, keyword, shape, rival, unnamed)
    shield = _named(keyword, claimed) if kept is Kept.NAMED and keyword is not None else None
    return pii_class(name, pattern, gate, hint_tail, check, token, late_gate=late_gate, shield=shield)


def _not_a_phone(text: str) -> bool:
    return not nanp_valid(text)


_SSN_WORDS = ("ssn", "ssns", "ss#", "ss no", "soc sec", "social security", "social security number")
_ITIN_WORDS = ("itin", "itins", "individual taxpayer", "taxpayer identification", "taxpayer id", "tax id", "tin")
_NHS_WORDS = ("nhs", "nhs no", "nhs number", "nhs#", "national health service", "health service number")
_SIN_WORDS = ("sin", "sin#", "social insurance", "social insurance number", "nas", "assurance sociale")
_TFN_WORDS = ("tfn", "tfn#", "tax file", "tax file number")
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
        r"\b9[0-9]{2}[-. ]?[0-9]{2}[-. ]?[0-9]{4}\b",
        r"[0-9]{2}[-. ]?[0-9]{2}[-. ]?[0-9]{4}",
        digits_valid(itin),
        _ITIN_WORDS,
        r"9[0-9]{2}([-. ])[0-9]{2}\1[0-9]{4}",
        digits=9,
        run=4,
        kept=Kept.NAMED,
    ),
    _national(
        "ssn_keyword",
        "SSN",
        r"\b[0-9]{3}[-. ]?[0-9]{2}[-. ]?[0-9]{4}\b",
        r"[0-9]{2}[-. ]?[0-9]{2}[-. ]?[0-9]{4}",
        digits_valid(ssn),
        _SSN_WORDS,
        digits=9,
        run=4,
        kept=Kept.NAMED,
        claimed=digits_valid(itin),
    ),
    _national(
        "gb_nhs",
        "NHS",
        r"\b[0-9]{3}[ -]?[0-9]{3}[ -]?[0-9]{4}\b",
        r"[0-9]{2}[ -]?[0-9]{3}[ -]?[0-9]{4}",
        digits_valid(nhs),
        _NHS_WORDS,
        r"[0-9]{3}([ -])[0-9]{3}\1[0-9]{4}",
        digits=10,
        run=4,
        unnamed=_not_a_phone,
        kept=Kept.NAMED,
    ),
    _national(
        "ca_sin",
        "SIN",
        r"\b[0-9]{3}[ -]?[0-9]{3}[ -]?[0-9]{3}\b",
        r"[0-9]{2}[ -]?[0-9]{3}[ -]?[0-9]{2}",  # the TFN's: one hint for both
        digits_valid(sin),
        _SIN_WORDS,
        r"[0-9]{3}-[0-9]{3}-[0-9]{3}",
        digits=9,
        run=3,
        rivals=_TFN_WORDS,
        kept=Kept.NAMED,
    ),
    _national(
        "au_tfn",
        "TFN",
        r"\b[0-9]{3}[ -]?[0-9]{3}[ -]?[0-9]{2,3}\b",
        r"[0-9]{2}[ -]?[0-9]{3}[ -]?[0-9]{2}",
        digits_valid(tfn),
        _TFN_WORDS,
        digits=8,
        run=3,
        kept=Kept.NAMED,
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
