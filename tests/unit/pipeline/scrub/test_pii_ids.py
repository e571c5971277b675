"""Personal identifiers: a labelled table of valid ids of every class the extended rules claim, in the
forms each is claimed in, and the spec's misses (`identifiers`, `national`).

Valid ids are drawn at random and kept when python-stdnum accepts them (or, for the format-only classes,
built to the format), so the table holds ids of the right shape and checksum, never a real person's. A
keyword-gated class is claimed only beside its name, so its rows carry one; the distinctive shapes are
also tried without.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from datetime import date, timedelta

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from stdnum import iban as stdnum_iban
from stdnum import luhn
from stdnum.ar import cuit
from stdnum.at import vnr
from stdnum.au import tfn
from stdnum.be import nn
from stdnum.bg import egn
from stdnum.br import cnpj, cpf
from stdnum.ca import sin
from stdnum.cz import rc
from stdnum.de import idnr
from stdnum.dk import cpr
from stdnum.ee import ik
from stdnum.es import dni, nie
from stdnum.fi import hetu
from stdnum.fr import nir
from stdnum.gb import nhs
from stdnum.gr import amka
from stdnum.hr import oib
from stdnum.ie import pps
from stdnum.in_ import aadhaar
from stdnum.it import codicefiscale
from stdnum.kr import rrn
from stdnum.lt import asmens
from stdnum.nl import bsn
from stdnum.pl import pesel
from stdnum.pt import cc
from stdnum.ro import cnp
from stdnum.se import personnummer
from stdnum.si import emso
from stdnum.us import itin, ssn

from pipeline.scrub import Policy, has_likely_pii, redact_pii, sanitize_text
from pipeline.scrub.classes import PiiClass
from pipeline.scrub.identifiers import EXTENDED_CLASSES, EXTENDED_TABLE
from tests.unit.pipeline.scrub.test_tables import Labelled, misses, well_formed

SPEC = Policy.spec_compatible()
Make = Callable[[random.Random], str]


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


def _valid(make: Make, check: Callable[[str], bool]) -> Make:
    """Draws of `make` until `check` accepts one."""

    def draw(rng: random.Random) -> str:
        for _ in range(200_000):
            value = make(rng)
            if check(value):
                return value
        raise AssertionError("no valid draw")

    return draw


def _birth(rng: random.Random, fmt: str) -> str:
    day = date(1940, 1, 1) + timedelta(days=rng.randrange(365 * 60))
    return day.strftime(fmt)


def _group(value: str, sizes: tuple[int, ...], sep: str) -> str:
    parts, at = [], 0
    for size in sizes:
        parts.append(value[at : at + size])
        at += size
    return sep.join(parts)


def _iban(rng: random.Random) -> str:
    country, bban = rng.choice(
        [
            ("GB", lambda: "".join(rng.choice(string.ascii_uppercase) for _ in range(4)) + _digits(rng, 14)),
            ("DE", lambda: _digits(rng, 18)),
            ("NL", lambda: "".join(rng.choice(string.ascii_uppercase) for _ in range(4)) + _digits(rng, 10)),
            ("FR", lambda: _digits(rng, 23)),
            ("ES", lambda: _digits(rng, 20)),
        ]
    )
    base = bban()
    number = country + stdnum_iban.calc_check_digits(country + "00" + base) + base
    return number if stdnum_iban.is_valid(number) else _iban(rng)


_CPF = _valid(lambda r: _digits(r, 11), cpf.is_valid)
_CNPJ = _valid(lambda r: _digits(r, 8) + "0001" + _digits(r, 2), cnpj.is_valid)
_CUIT = _valid(lambda r: r.choice(["20", "23", "27", "30"]) + _digits(r, 9), cuit.is_valid)
_CARD = _valid(lambda r: r.choice(["4", "51", "52", "55", "2221", "6011"]) + _digits(r, 12), luhn.is_valid)
_AADHAAR = _valid(lambda r: str(r.randint(2, 9)) + _digits(r, 11), aadhaar.is_valid)
_DNI = _valid(lambda r: _digits(r, 8) + r.choice("TRWAGMYFPDXBNJZSQVHLCKE"), dni.is_valid)
_NIE = _valid(lambda r: r.choice("XYZ") + _digits(r, 7) + r.choice("TRWAGMYFPDXBNJZSQVHLCKE"), nie.is_valid)
_SSN = _valid(lambda r: _digits(r, 9), lambda v: ssn.is_valid(v) and not v.startswith("9"))
_ITIN = _valid(lambda r: "9" + _digits(r, 2) + r.choice(["70", "78", "88", "90", "94"]) + _digits(r, 4), itin.is_valid)
_RRN = _valid(lambda r: _birth(r, "%y%m%d") + r.choice("12") + _digits(r, 6), rrn.is_valid)
_NHS = _valid(lambda r: _digits(r, 10), nhs.is_valid)
_SIN = _valid(lambda r: r.choice("1245679") + _digits(r, 8), sin.is_valid)
_TFN = _valid(lambda r: _digits(r, 9), tfn.is_valid)
_AT = _valid(lambda r: _digits(r, 4) + _birth(r, "%d%m%y"), vnr.is_valid)
_BE = _valid(lambda r: _birth(r, "%y%m%d") + _digits(r, 5), nn.is_valid)
_BG = _valid(lambda r: _birth(r, "%y%m%d") + _digits(r, 4), egn.is_valid)
_CZ = _valid(lambda r: _birth(r, "%y%m%d") + _digits(r, 4), rc.is_valid)
_DE = _valid(lambda r: str(r.randint(1, 9)) + _digits(r, 10), idnr.is_valid)
_DK = _valid(lambda r: _birth(r, "%d%m%y") + _digits(r, 4), cpr.is_valid)
_EE = _valid(lambda r: r.choice("3456") + _birth(r, "%y%m%d") + _digits(r, 4), ik.is_valid)
_FI = _valid(
    lambda r: _birth(r, "%d%m%y") + "-" + _digits(r, 3) + r.choice(string.digits + "ABCDEFHJKLMNPRSTUVWXY"),
    hetu.is_valid,
)
_FR = _valid(lambda r: r.choice("12") + _birth(r, "%y%m") + _digits(r, 8) + _digits(r, 2), nir.is_valid)
_GR = _valid(lambda r: _birth(r, "%d%m%y") + _digits(r, 5), amka.is_valid)
_HR = _valid(lambda r: _digits(r, 11), oib.is_valid)
_IE = _valid(lambda r: _digits(r, 7) + r.choice("ABCDEFGHIJKLMNOPQRSTUVW"), pps.is_valid)
_LT = _valid(lambda r: r.choice("3456") + _birth(r, "%y%m%d") + _digits(r, 4), asmens.is_valid)
_NL = _valid(lambda r: _digits(r, 9), bsn.is_valid)
_PL = _valid(lambda r: _birth(r, "%y%m%d") + _digits(r, 5), pesel.is_valid)
_PT = _valid(
    lambda r: _digits(r, 9) + "".join(r.choice(string.ascii_uppercase) for _ in range(2)) + _digits(r, 1), cc.is_valid
)
_RO = _valid(
    lambda r: r.choice("12") + _birth(r, "%y%m%d") + r.choice(["01", "12", "40"]) + _digits(r, 4), cnp.is_valid
)
_SE = _valid(lambda r: _birth(r, "%y%m%d") + "-" + _digits(r, 4), personnummer.is_valid)
_SI = _valid(lambda r: _birth(r, "%d%m") + _birth(r, "%Y")[1:] + "50" + _digits(r, 4), emso.is_valid)


def _codice_fiscale(rng: random.Random) -> str:
    letters = "".join(rng.choice(string.ascii_uppercase) for _ in range(6))
    born = _birth(rng, "%y") + rng.choice("ABCDEHLMPRST") + f"{rng.randint(1, 28):02d}"
    place = rng.choice(string.ascii_uppercase) + _digits(rng, 3)
    body = letters + born + place
    return body + codicefiscale.calc_check_digit(body)


def _rfc(rng: random.Random) -> str:
    return (
        "".join(rng.choice(string.ascii_uppercase) for _ in range(4))
        + _birth(rng, "%y%m%d")
        + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(3))
    )


def _pan(rng: random.Random) -> str:
    return (
        "".join(rng.choice(string.ascii_uppercase) for _ in range(5))
        + _digits(rng, 4)
        + rng.choice(string.ascii_uppercase)
    )


def _nino(rng: random.Random) -> str:
    first = rng.choice("ABCEGHJKLMNOPRSTWXYZ")
    second = rng.choice("ABCEGHJKLMNPRSTWXYZ")
    if first + second in ("BG", "GB", "KN", "NK", "NT", "TN", "ZZ"):
        return _nino(rng)
    return first + second + _digits(rng, 6) + rng.choice("ABCD")


# (label, how an id is written, contexts): `{}` in a context is where the written id goes.
Form = tuple[str, Callable[[random.Random], str], tuple[str, ...]]
_PLAIN = ("id {} on file", "{}", "the number is {}.", "| {} |")


def _cpf_formatted(r: random.Random) -> str:
    v = _CPF(r)
    return f"{v[:3]}.{v[3:6]}.{v[6:9]}-{v[9:]}"


def _cnpj_formatted(r: random.Random) -> str:
    v = _CNPJ(r)
    return f"{v[:2]}.{v[2:5]}.{v[5:8]}/{v[8:12]}-{v[12:]}"


FORMS: list[Form] = [
    ("cpf", _cpf_formatted, (*_PLAIN, "CPF: {}")),
    ("cpf", _CPF, ("CPF {}", "cpf: {}")),
    ("cnpj", _cnpj_formatted, _PLAIN),
    ("cnpj", _CNPJ, ("CNPJ {}",)),
    ("cuit", lambda r: (v := _CUIT(r))[:2] + "-" + v[2:10] + "-" + v[10], (*_PLAIN, "CUIT {}")),
    (
        "iban",
        lambda r: _group(v := _iban(r), tuple([4] * (len(v) // 4 + 1)), " ").strip(),
        (*_PLAIN, "IBAN {} TRANSFER"),
    ),
    ("iban", _iban, (*_PLAIN, "IBAN: {} Reference")),
    ("credit_card", lambda r: _group(_CARD(r), (4, 4, 4, 4), " "), _PLAIN),
    ("credit_card", lambda r: _group(_CARD(r), (4, 4, 4, 4), "-"), _PLAIN),
    ("credit_card", _CARD, ("card {}", "visa {} exp 09/29")),
    ("aadhaar", lambda r: _group(_AADHAAR(r), (4, 4, 4), " "), _PLAIN),
    ("aadhaar", lambda r: _group(_AADHAAR(r), (4, 4, 4), ":"), _PLAIN),  # the miss: colon-grouped
    ("aadhaar", _AADHAAR, (*_PLAIN, "Aadhaar no. {}")),  # the miss: bare
    ("dni", _DNI, (*_PLAIN, "DNI {}")),
    ("dni", lambda r: (v := _DNI(r))[:8] + "-" + v[8], _PLAIN),  # the miss: hyphenated
    ("dni", lambda r: f"{(v := _DNI(r))[:2]}.{v[2:5]}.{v[5:8]}-{v[8]}", _PLAIN),
    ("nie", _NIE, _PLAIN),
    ("nie", lambda r: f"{(v := _NIE(r))[0]}-{v[1:8]}-{v[8]}", _PLAIN),  # the miss: hyphenated
    ("nino", _nino, _PLAIN),
    ("nino", lambda r: f"{(v := _nino(r))[:2]} {v[2:4]} {v[4:6]} {v[6:8]} {v[8]}", _PLAIN),  # the miss: spaced
    ("ssn", lambda r: f"{(v := _SSN(r))[:3]}-{v[3:5]}-{v[5:]}", _PLAIN),
    ("ssn", lambda r: f"{(v := _SSN(r))[:3]}.{v[3:5]}.{v[5:]}", _PLAIN),  # the miss: dotted
    ("ssn", lambda r: f"{(v := _SSN(r))[:3]} {v[3:5]} {v[5:]}", _PLAIN),  # the miss: spaced
    ("ssn", _SSN, ("SSN {}", "social security number: {}")),
    ("rrn", lambda r: f"{(v := _RRN(r))[:6]}-{v[6:]}", _PLAIN),
    ("rrn", _RRN, (*_PLAIN, "RRN {}")),  # the miss: undashed
    ("rfc", _rfc, _PLAIN),
    ("pan_in", _pan, _PLAIN),
    ("my_number", lambda r: _digits(r, 12), ("My Number {}", "マイナンバー: {}")),
    ("itin", lambda r: f"{(v := _ITIN(r))[:3]}-{v[3:5]}-{v[5:]}", _PLAIN),
    ("itin", _ITIN, ("ITIN {}", "itin: {}")),
    ("nhs", lambda r: _group(_NHS(r), (3, 3, 4), " "), ("NHS number: {}", "NHS No. {}", "{} (NHS)")),
    ("nhs", _NHS, ("NHS {}",)),
    ("sin", lambda r: _group(_SIN(r), (3, 3, 3), " "), ("SIN: {}", "Social Insurance Number {}", "NAS {}")),
    ("sin", lambda r: _group(_SIN(r), (3, 3, 3), "-"), ("SIN {}",)),
    ("tfn", lambda r: _group(_TFN(r), (3, 3, 3), " "), ("TFN: {}", "tax file number {}")),
    ("at_svnr", lambda r: _group(_AT(r), (4, 6), " "), ("SVNR {}", "Sozialversicherungsnummer: {}")),
    ("be_nn", lambda r: f"{(v := _BE(r))[:2]}.{v[2:4]}.{v[4:6]}-{v[6:9]}.{v[9:]}", _PLAIN),
    ("be_nn", _BE, ("Rijksregisternummer {}", "numéro national: {}")),
    ("bg_egn", _BG, ("ЕГН {}", "EGN: {}")),
    ("cz_sk_rc", lambda r: f"{(v := _CZ(r))[:6]}/{v[6:]}", _PLAIN),
    ("cz_sk_rc", _CZ, ("rodné číslo {}",)),
    ("de_idnr", lambda r: _group(_DE(r), (2, 3, 3, 3), " "), ("Steuer-ID: {}", "Identifikationsnummer {}")),
    ("de_idnr", _DE, ("IdNr {}",)),
    ("dk_cpr", lambda r: f"{(v := _DK(r))[:6]}-{v[6:]}", ("CPR {}", "CPR-nr.: {}")),
    ("ee_ik", _EE, ("isikukood {}",)),
    ("fi_hetu", _FI, _PLAIN),
    ("fr_nir", lambda r: _group(_FR(r), (1, 2, 2, 2, 3, 3, 2), " "), _PLAIN),
    ("fr_nir", _FR, ("NIR {}", "numéro de sécurité sociale : {}")),
    ("gr_amka", _GR, ("ΑΜΚΑ {}", "AMKA: {}")),
    ("hr_oib", _HR, ("OIB: {}",)),
    ("ie_pps", _IE, ("PPS {}", "PPSN: {}")),
    ("it_cf", _codice_fiscale, _PLAIN),
    ("lt_ak", _LT, ("asmens kodas {}",)),
    ("nl_bsn", _NL, ("BSN {}", "burgerservicenummer: {}")),
    ("pl_pesel", _PL, ("PESEL {}", "PESEL: {}")),
    ("pt_cc", lambda r: f"{(v := _PT(r))[:8]} {v[8]} {v[9:]}", _PLAIN),
    ("ro_cnp", _RO, ("CNP {}",)),
    ("se_pnr", _SE, _PLAIN),
    ("se_pnr", lambda r: _SE(r).replace("-", ""), ("personnummer {}",)),
    ("si_emso", _SI, ("EMŠO {}", "EMSO: {}")),
]
_PER_CONTEXT = 4


def pii_rows(seed: int = 15) -> list[Labelled]:
    """The labelled table: every form of every class, in each of its contexts, a few draws each."""
    rng = random.Random(seed)
    rows: dict[tuple[str, str], Labelled] = {}
    for label, make, contexts in FORMS:
        for context in contexts:
            for _ in range(_PER_CONTEXT):
                written = make(rng)
                row = Labelled(f"pii:{label}", context.format(written), (written,))
                rows[(row.label, row.text)] = row
    return list(rows.values())


PII_ROWS = pii_rows()


def test_the_table_is_well_formed() -> None:
    well_formed(PII_ROWS)
    assert len({row.label for row in PII_ROWS}) >= 35


def test_every_row_is_redacted() -> None:
    assert misses(PII_ROWS) == []


def test_the_spec_misses_stay_missed_in_spec_mode() -> None:
    rows = [
        "IBAN GB82 WEST 1234 5698 7654 32 TRANSFER",
        "SSN 123.45.6789",
        "NINO AB 12 34 56 C",
        "RRN 9001011234568",
        "DNI 12345678-Z",
        "aadhaar 2341:2341:2346",
        "phone +44 20 7946 0958",
    ]
    for text in rows:
        assert sanitize_text(text, SPEC).value == text
        assert sanitize_text(text).value != text


MISSES_FIXED = [
    ("IBAN GB82 WEST 1234 5698 7654 32 TRANSFER", "IBAN [REDACTED_PII_IBAN] TRANSFER"),
    ("pay GB82WEST12345698765432 Thanks", "pay [REDACTED_PII_IBAN] Thanks"),
    ("SSN 123.45.6789 and 123 45 6789", "SSN [REDACTED_PII_SSN] and [REDACTED_PII_SSN]"),
    ("NINO AB 12 34 56 C", "NINO [REDACTED_PII_NINO]"),
    ("RRN 9001011234568", "RRN [REDACTED_PII_RRN]"),
    ("DNI 12345678-Z, NIE X-1234567-L", "DNI [REDACTED_PII_DNI], NIE [REDACTED_PII_DNI]"),
    ("uid 234123412346", "uid [REDACTED_PII_AADHAAR]"),
    ("2341 2341 2346 / 2341:2341:2346", "[REDACTED_PII_AADHAAR] / [REDACTED_PII_AADHAAR]"),
    ("ITIN 912-90-3456", "ITIN [REDACTED_PII_ITIN]"),
    ("NHS number 943 476 5919", "NHS number [REDACTED_PII_NHS]"),
    ("SIN 123 456 782", "SIN [REDACTED_PII_SIN]"),
    ("TFN 123 456 782", "TFN [REDACTED_PII_TFN]"),
    ("nino ab 12 34 56 c", "nino [REDACTED_PII_NINO]"),
    ("PESEL 44051401359", "PESEL [REDACTED_PII_PL_PESEL]"),
    ("CF RCCMNL83S18D969H", "CF [REDACTED_PII_IT_CF]"),
    ("hetu 131052-308T", "hetu [REDACTED_PII_FI_HETU]"),
    ("rč 710319/2745", "rč [REDACTED_PII_RC]"),
]


@pytest.mark.parametrize(("text", "expected"), MISSES_FIXED)
def test_a_miss_of_the_spec_rules_is_fixed(text: str, expected: str) -> None:
    assert redact_pii(text).value == expected


# Each checksum or structure gate still refuses what it refused; no keyword, no bare id.
REFUSED = [
    "IBAN GB82 WEST 1234 5698 7654 33",
    "SSN 666-12-3456",
    "SSN 123.00.4567",
    "NINO BG 12 34 56 A",
    "ab 12 34 56 c",
    "DNI 12345678-A",
    "aadhaar 2341 2341 2345",
    "id 123412341234",
    "RRN 9001011234567",
    "RRN 901301-1234567",
    "ref 9434765870",
    "123456782",
    "order 123 456 782",
    "44051401359",
    "PESEL 44051401358",
    "rč 710319/2746",
    "order 2026-01-02 shipped",
    "build 20240115-1034",
]


@pytest.mark.parametrize("text", REFUSED)
def test_an_invalid_or_unnamed_candidate_is_left_alone(text: str) -> None:
    assert redact_pii(text).value == text


def test_corroborated_asks_a_keyword_of_bare_aadhaar_and_rrn_runs() -> None:
    corroborated = Policy.corroborated()
    assert redact_pii("ref 234123412346", corroborated).value == "ref 234123412346"
    assert redact_pii("aadhaar 234123412346", corroborated).value == "aadhaar [REDACTED_PII_AADHAAR]"
    assert redact_pii("ref 9001011234568", corroborated).value == "ref 9001011234568"
    assert redact_pii("RRN 9001011234568", corroborated).value == "RRN [REDACTED_PII_RRN]"


LIKELY_PII = [
    ("AB 12 34 56 C", True),
    ("ITIN 912-90-3456", True),
    ("NHS number 943 476 5919", True),
    ("RCCMNL83S18D969H", True),
    ("234123412346", False),  # a bare run: left out, as bare cards are
    ("9001011234568", False),
    ("+44 20 7946 0958", False),
    ("chat-5511987654321-1700000000000", False),
]


@pytest.mark.parametrize(("text", "expected"), LIKELY_PII)
def test_has_likely_pii_under_the_extended_rules(text: str, expected: bool) -> None:
    assert has_likely_pii(text) is expected


def test_emails_are_kept_unless_the_policy_redacts_them() -> None:
    text = "write to ana.lima+ops@example.com.br today"
    assert sanitize_text(text).value == text
    assert sanitize_text(text, SPEC).value == text
    redacted = sanitize_text(text, Policy(redact_emails=True))
    assert (redacted.value, redacted.report.pii_redactions) == ("write to [REDACTED_PII_EMAIL] today", 1)
    assert sanitize_text(redacted.value, Policy(redact_emails=True)).value == redacted.value


# --- The extended table's union of hints: shorter than every tail, and still implied by each. ---------------

_NOISE = st.text(alphabet=st.sampled_from("0123456789 -.:/()+ABxyz\n\t"), max_size=12)


@pytest.mark.parametrize("pii_class", EXTENDED_CLASSES, ids=lambda c: c.name)
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_the_union_matches_wherever_a_class_hint_does(pii_class: PiiClass, data: st.DataObject) -> None:
    text = data.draw(_NOISE) + data.draw(st.from_regex(pii_class.hint)) + data.draw(_NOISE)
    hint = pii_class.hint.search(text)
    assume(hint is not None)
    assert EXTENDED_TABLE.any_hint.search(text) is not None
    assert EXTENDED_TABLE.any_hint.match(text, hint.start()) is not None


@pytest.mark.parametrize("pii_class", EXTENDED_CLASSES, ids=lambda c: c.name)
@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_every_match_of_an_extended_class_holds_its_hint(pii_class: PiiClass, data: st.DataObject) -> None:
    text = " " + data.draw(st.from_regex(pii_class.pattern, fullmatch=True)) + " "
    assume(pii_class.pattern.search(text) is not None)
    assert pii_class.hint.search(text) is not None
