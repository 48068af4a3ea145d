"""The Chinese and English renderings of `builtin:dates-zh`, against the issue's examples,
hand-written cases and an independent numeral reference."""

import datetime
import random
import re

import pytest

from transformer_zoo.data.builtin import chinese, english

ISSUE_DATE_FORMS = ["March 5, 2021", "5 March 2021", "the fifth of March, 2021"]


def test_issue_date_forms_all_map_to_one_target():
    forms = english.full_date_forms(2021, 3, 5)
    assert all(form in forms for form in ISSUE_DATE_FORMS)
    assert chinese.chinese_date(2021, 3, 5) == "2021年3月5日"


def test_issue_weekday_form_adds_the_true_weekday():
    assert "Friday, March 5, 2021" in english.weekday_date_forms(2021, 3, 5)
    assert chinese.chinese_date(2021, 3, 5, weekday=datetime.date(2021, 3, 5).weekday()) == (
        "2021年3月5日星期五"
    )


def test_issue_number_and_time_examples():
    assert "one thousand two hundred and thirty-four" in english.number_forms(1234)
    assert chinese.chinese_number(1234) == "一千二百三十四"
    assert "quarter past three in the afternoon" in english.time_forms(15, 15)
    assert chinese.chinese_time(15, 15) == "下午三点十五分"


@pytest.mark.parametrize(
    "n, expected",
    [
        (0, "零"),
        (7, "七"),
        (10, "十"),
        (15, "十五"),
        (20, "二十"),
        (110, "一百一十"),
        (115, "一百一十五"),
        (200, "二百"),
        (1005, "一千零五"),
        (1050, "一千零五十"),
        (1234, "一千二百三十四"),
        (2000, "二千"),
        (10015, "一万零一十五"),
        (10050, "一万零五十"),
        (100000, "十万"),
        (100500, "十万零五百"),
        (101000, "十万一千"),
        (150000, "十五万"),
        (999999, "九十九万九千九百九十九"),
        (1001000, "一百万一千"),
        (20000000, "二千万"),
        (100000005, "一亿零五"),
        (100001000, "一亿零一千"),
    ],
)
def test_chinese_numbers_follow_the_written_conventions(n, expected):
    assert chinese.chinese_number(n) == expected


def _reference_numeral(n: int) -> str:
    """The textbook algorithm, written independently: spell every digit with its unit,
    then let regular expressions drop and merge the zeros."""
    if n == 0:
        return "零"
    digits, units = "零一二三四五六七八九", ["", "十", "百", "千"]
    groups = f"{n:012d}"
    text = ""
    for group, big in zip((groups[:4], groups[4:8], groups[8:]), ("亿", "万", ""), strict=True):
        text += "".join(
            digits[int(d)] + (units[3 - i] if d != "0" else "") for i, d in enumerate(group)
        )
        text += big
    text = re.sub("零+", "零", text)  # a run of zeros reads as one 零
    text = re.sub("零([亿万])", r"\1", text)  # a group's trailing zeros are silent
    text = re.sub("^[亿万]+", "", text)  # empty leading groups
    text = text.replace("亿万", "亿零")  # an empty 万 group is a gap
    text = re.sub("零+", "零", text).strip("零")
    return re.sub("^一十", "十", text)


@pytest.mark.parametrize("seed", range(3))
def test_chinese_numbers_match_an_independent_reference(seed):
    rng = random.Random(seed)
    numbers = list(range(0, 2100)) + [rng.randrange(10 ** rng.randint(1, 11)) for _ in range(3000)]
    numbers += [int(str(rng.randrange(1, 10)) + "0" * rng.randint(1, 10)) for _ in range(200)]
    for n in numbers:
        assert chinese.chinese_number(n) == _reference_numeral(n), n


@pytest.mark.parametrize(
    "hour, minute, expected",
    [
        (0, 0, "零点"),
        (0, 5, "零点零五分"),
        (2, 30, "凌晨两点三十分"),
        (6, 0, "上午六点"),
        (10, 10, "上午十点十分"),
        (12, 0, "中午十二点"),
        (12, 45, "中午十二点四十五分"),
        (14, 2, "下午两点零二分"),
        (15, 15, "下午三点十五分"),
        (18, 30, "晚上六点三十分"),
        (23, 59, "晚上十一点五十九分"),
    ],
)
def test_chinese_times_follow_the_conventions(hour, minute, expected):
    assert chinese.chinese_time(hour, minute) == expected


@pytest.mark.parametrize(
    "n, british, american",
    [
        (0, "zero", "zero"),
        (21, "twenty-one", "twenty-one"),
        (105, "one hundred and five", "one hundred five"),
        (1005, "one thousand and five", "one thousand five"),
        (20000, "twenty thousand", "twenty thousand"),
        (
            123456,
            "one hundred and twenty-three thousand four hundred and fifty-six",
            "one hundred twenty-three thousand four hundred fifty-six",
        ),
    ],
)
def test_english_number_words(n, british, american):
    assert english.english_number(n, british=True) == british
    assert english.english_number(n, british=False) == american


@pytest.mark.parametrize(
    "hour, minute, phrase",
    [
        (0, 0, "midnight"),
        (12, 0, "noon"),
        (0, 15, "quarter past midnight"),
        (7, 30, "half past seven in the morning"),
        (20, 40, "twenty to nine in the evening"),
        (11, 45, "quarter to noon"),
        (23, 45, "quarter to midnight"),
        (12, 45, "quarter to one in the afternoon"),
        (15, 0, "three o'clock in the afternoon"),
        (15, 5, "3:05 pm"),
        (3, 5, "03:05"),
        (9, 7, "seven minutes past nine in the morning"),
    ],
)
def test_english_time_phrases_name_the_right_time(hour, minute, phrase):
    assert phrase in english.time_forms(hour, minute)


def test_every_english_source_has_exactly_one_chinese_target():
    """A source that two values share would make the task ambiguous."""
    seen: dict[str, str] = {}

    def add(forms, target):
        for form in forms:
            assert seen.setdefault(form, target) == target, form

    for hour in range(24):
        for minute in range(60):
            add(english.time_forms(hour, minute), chinese.chinese_time(hour, minute))
    for n in list(range(3000)) + list(range(10000, 1000000, 997)):
        add(english.number_forms(n), chinese.chinese_number(n))
    for year in (1999, 2000, 2024):
        day = datetime.date(year, 1, 1)
        while day.year == year:
            y, m, d, w = day.year, day.month, day.day, day.weekday()
            add(english.full_date_forms(y, m, d), chinese.chinese_date(y, m, d))
            add(english.weekday_date_forms(y, m, d), chinese.chinese_date(y, m, d, w))
            add(english.month_day_forms(m, d), chinese.chinese_date(None, m, d))
            add(english.year_month_forms(y, m), chinese.chinese_date(y, m))
            day += datetime.timedelta(days=1)
