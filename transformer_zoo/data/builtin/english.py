"""English surface forms of numbers, dates and times for `builtin:dates-zh`.

Each `*_forms` function returns every English phrasing the dataset uses for one value;
the generator picks among them, so many sources share one Chinese target.
"""

from __future__ import annotations

import datetime

ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
ORDINAL_ONES = (
    "_ first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
    "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth"
).split()
ORDINAL_TENS = {20: "twentieth", 30: "thirtieth"}
MONTHS = (
    "_ January February March April May June July August September October November December"
).split()
MONTH_ABBREVIATIONS = "_ Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
SCALES = ((10**9, "billion"), (10**6, "million"), (1000, "thousand"))


def _below_hundred(n: int) -> str:
    if n < 20:
        return ONES[n]
    tens, ones = divmod(n, 10)
    return TENS[tens] + (f"-{ONES[ones]}" if ones else "")


def _below_thousand(n: int, british: bool) -> str:
    hundreds, rest = divmod(n, 100)
    if not hundreds:
        return _below_hundred(rest)
    out = f"{ONES[hundreds]} hundred"
    if rest:
        out += (" and " if british else " ") + _below_hundred(rest)
    return out


def english_number(n: int, british: bool = True) -> str:
    """1234 → "one thousand two hundred and thirty-four" (British) or without "and"."""
    if not isinstance(n, int) or not 0 <= n < 10**12:
        raise ValueError(f"`n` must be an integer in [0, 10**12). Received: n={n!r}")
    if n < 1000:
        return _below_thousand(n, british)
    parts, rest = [], n
    for value, name in SCALES:
        if rest >= value:
            parts.append(f"{_below_thousand(rest // value, british)} {name}")
            rest %= value
    if rest:
        # British English joins a final part below 100 with "and": "one thousand and five".
        joiner = "and " if british and rest < 100 else ""
        parts.append(joiner + _below_thousand(rest, british))
    return " ".join(parts)


def english_ordinal(n: int) -> str:
    """1 ≤ n ≤ 31 as a word: 5 → "fifth", 21 → "twenty-first"."""
    if n < 20:
        return ORDINAL_ONES[n]
    tens, ones = divmod(n, 10)
    return ORDINAL_TENS[n] if not ones else f"{TENS[tens]}-{ORDINAL_ONES[ones]}"


def ordinal_suffix(n: int) -> str:
    """5 → "5th", 21 → "21st", 12 → "12th"."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def number_forms(n: int) -> list[str]:
    """Words (British and American) and digits (plain and with thousands commas)."""
    return sorted({english_number(n, True), english_number(n, False), str(n), f"{n:,}"})


def full_date_forms(year: int, month: int, day: int) -> list[str]:
    """Phrasings of a whole date without a weekday: "March 5, 2021", "5 March 2021", ..."""
    name, short, word = MONTHS[month], MONTH_ABBREVIATIONS[month], english_ordinal(day)
    return [
        f"{name} {day}, {year}",
        f"{day} {name} {year}",
        f"the {word} of {name}, {year}",
        f"{name} the {word}, {year}",
        f"{name} {ordinal_suffix(day)}, {year}",
        f"{ordinal_suffix(day)} {name} {year}",
        f"the {ordinal_suffix(day)} of {name} {year}",
        f"{short} {day}, {year}",
        f"{day} {short} {year}",
        f"{year}-{month:02d}-{day:02d}",
    ]


def weekday_date_forms(year: int, month: int, day: int) -> list[str]:
    """Phrasings with the (true) weekday: "Friday, March 5, 2021", ..."""
    name, weekday = MONTHS[month], WEEKDAYS[datetime.date(year, month, day).weekday()]
    return [
        f"{weekday}, {name} {day}, {year}",
        f"{weekday}, {day} {name} {year}",
        f"{weekday}, the {english_ordinal(day)} of {name}, {year}",
        f"{weekday} {ordinal_suffix(day)} {name} {year}",
    ]


def month_day_forms(month: int, day: int) -> list[str]:
    """Phrasings without a year: "March 5", "the fifth of March", ..."""
    name = MONTHS[month]
    return [f"{name} {day}", f"{day} {name}", f"the {english_ordinal(day)} of {name}"]


def year_month_forms(year: int, month: int) -> list[str]:
    """Phrasings without a day: "March 2021", "Mar 2021"."""
    return [f"{MONTHS[month]} {year}", f"{MONTH_ABBREVIATIONS[month]} {year}"]


def _period_phrases(hour: int) -> list[str]:
    """English periods of a 24-hour `hour` in 1..23 ("at night" only late in the evening)."""
    if hour < 12:
        return ["in the morning"]
    if hour < 18:
        return ["in the afternoon"]
    return ["in the evening", "at night"] if hour >= 21 else ["in the evening"]


def _named_hours(hour: int) -> list[str]:
    """The hour as "past"/"to" forms name it: "midnight", "noon", "three in the afternoon"."""
    if hour in (0, 12):
        return ["midnight" if hour == 0 else "noon"]
    return [f"{ONES[hour % 12]} {period}" for period in _period_phrases(hour)]


def _minute_phrases(minutes: int) -> list[str]:
    """1 ≤ minutes ≤ 30 before "past" or "to": "quarter", "ten", "ten minutes", "seven minutes"."""
    if minutes == 15:
        return ["quarter", "a quarter"]
    if minutes == 30:
        return ["half"]
    words = english_number(minutes, british=False)
    unit = "minute" if minutes == 1 else "minutes"
    return [f"{words} {unit}"] + ([words] if minutes % 5 == 0 else [])


def time_forms(hour: int, minute: int) -> list[str]:
    """Phrasings of a 24-hour time: "3:15 pm", "15:15", "quarter past three in the afternoon", ..."""
    if not 0 <= hour < 24 or not 0 <= minute < 60:
        raise ValueError(f"Expected 0 ≤ hour < 24, 0 ≤ minute < 60. Received: {hour}:{minute}")
    hour12 = hour % 12 or 12
    meridiem = ("am", "a.m.") if hour < 12 else ("pm", "p.m.")
    forms = [f"{hour:02d}:{minute:02d}"]
    forms += [f"{hour12}:{minute:02d} {m}" for m in meridiem]
    forms.append(f"{hour12}.{minute:02d} {meridiem[0]}")
    if minute == 0:
        forms += [f"{hour12} {m}" for m in meridiem]
        if hour in (0, 12):
            name = "midnight" if hour == 0 else "noon"
            forms += [name, f"twelve {name}"]
        else:
            for period in _period_phrases(hour):
                forms += [f"{ONES[hour12]} o'clock {period}", f"{ONES[hour12]} {period}"]
        return forms
    spoken_minute = f"oh {ONES[minute]}" if minute < 10 else english_number(minute, british=False)
    forms.append(f"{ONES[hour12]} {spoken_minute} {meridiem[0]}")
    if hour:
        forms += [f"{ONES[hour12]} {spoken_minute} {p}" for p in _period_phrases(hour)]
    if minute <= 30:
        relation, minutes, named = "past", minute, _named_hours(hour)
    else:
        relation, minutes, named = "to", 60 - minute, _named_hours((hour + 1) % 24)
    forms += [f"{m} {relation} {h}" for m in _minute_phrases(minutes) for h in named]
    return forms
