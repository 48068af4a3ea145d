"""Chinese renderings of numbers, dates and times for `builtin:dates-zh`.

Conventions (written forms, as the issue's examples use them):

Numbers (0 ≤ n < 10¹²), grouped by four digits with 万 (10⁴) and 亿 (10⁸):
- 二 throughout, never 两: 2000 → 二千, 1234 → 一千二百三十四.
- One 零 stands for any run of zeros inside the number; trailing zeros are silent:
  1005 → 一千零五, 1050 → 一千零五十, 10050 → 一万零五十, 100500 → 十万零五百.
- A four-digit group below 1000 that follows a higher group starts with 零:
  10015 → 一万零一十五, 1001000 → 一百万一千 (the lower group 1000 needs none).
- 十 alone at the very start, 一十 elsewhere: 10 → 十, 15 → 十五, 150000 → 十五万,
  but 115 → 一百一十五 and 10015 → 一万零一十五.
- 0 → 零.

Dates: Arabic digits, no zero padding, 年 / 月 / 日: 2021年3月5日. A weekday follows the
day without a space as 星期一 … 星期六, 星期日 (not 星期天): 2021年3月5日星期五.
Partial dates keep only what the English gives: 2021年3月, 3月5日.

Times: a period word, the 12-hour hour with 点, then the minutes with 分:
- periods by the hour of the 24-hour clock: 0 → none (the hour reads 零点), 1–5 凌晨,
  6–11 上午, 12 中午, 13–17 下午, 18–23 晚上;
- the hour 2 reads 两点 (二点 is not said); other hours use the number rules (十二点);
- minutes 1–9 read 零五分, 10–59 by the number rules (十分, 十五分, 三十分), so a quarter
  is 十五分 and a half 三十分 (never 一刻 or 半); whole hours have no 分;
- 15:15 → 下午三点十五分, 0:00 → 零点, 0:05 → 零点零五分, 12:00 → 中午十二点,
  14:02 → 下午两点零二分, 23:59 → 晚上十一点五十九分.
"""

from __future__ import annotations

DIGITS = "零一二三四五六七八九"
GROUP_UNITS = ("", "万", "亿")
PLACE_UNITS = ("", "十", "百", "千")
WEEKDAYS = ("星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日")


def _four_digits(group: int) -> str:
    """1 ≤ group ≤ 9999 in full (一十 kept), zeros inside collapsed to one 零."""
    out, pending_zero = "", False
    for place in range(3, -1, -1):
        digit = group // 10**place % 10
        if digit == 0:
            pending_zero = bool(out)
            continue
        if pending_zero:
            out += "零"
            pending_zero = False
        out += DIGITS[digit] + PLACE_UNITS[place]
    return out


def chinese_number(n: int) -> str:
    """The written Chinese numeral of 0 ≤ n < 10¹²: 1234 → 一千二百三十四."""
    if not isinstance(n, int) or not 0 <= n < 10**12:
        raise ValueError(f"`n` must be an integer in [0, 10**12). Received: n={n!r}")
    if n == 0:
        return "零"
    out, zero_gap = "", False
    for index in range(len(GROUP_UNITS) - 1, -1, -1):
        group = n // 10 ** (4 * index) % 10000
        if group == 0:
            zero_gap = bool(out)
            continue
        if out and (zero_gap or group < 1000):
            out += "零"
        out += _four_digits(group) + GROUP_UNITS[index]
        zero_gap = False
    return out[1:] if out.startswith("一十") else out


def chinese_date(
    year: int | None, month: int, day: int | None = None, weekday: int | None = None
) -> str:
    """2021年3月5日 (+ 星期五 for weekday=4, Monday = 0); year or day may be None."""
    out = f"{year}年" if year is not None else ""
    out += f"{month}月"
    if day is not None:
        out += f"{day}日"
    if weekday is not None:
        out += WEEKDAYS[weekday]
    return out


def chinese_period(hour: int) -> str:
    """The period word of a 24-hour `hour` (empty for the hour 0, which reads 零点)."""
    if hour == 0:
        return ""
    if hour <= 5:
        return "凌晨"
    if hour <= 11:
        return "上午"
    if hour == 12:
        return "中午"
    if hour <= 17:
        return "下午"
    return "晚上"


def chinese_time(hour: int, minute: int) -> str:
    """15:15 → 下午三点十五分, 0:00 → 零点 (see the module conventions)."""
    if not 0 <= hour < 24 or not 0 <= minute < 60:
        raise ValueError(f"Expected 0 ≤ hour < 24, 0 ≤ minute < 60. Received: {hour}:{minute}")
    hour12 = hour if hour <= 12 else hour - 12
    spoken_hour = "两" if hour12 == 2 else chinese_number(hour12)
    out = f"{chinese_period(hour)}{spoken_hour}点"
    if minute:
        out += ("零" if minute < 10 else "") + chinese_number(minute) + "分"
    return out
