"""`builtin:dates-zh`: English → Chinese translation of dates, numbers and times.

Our own code generates the data, deterministically for a seed. Many English surface
forms map to one Chinese target, and the task needs reordering ("the fifth of March,
2021" → 2021年3月5日) and regrouping ("one hundred and twenty-three thousand four
hundred and fifty-six" → 十二万三千四百五十六):

- dates, years 1900–2099: "March 5, 2021", "5 March 2021", "the fifth of March, 2021",
  "Friday, March 5, 2021" (→ 2021年3月5日星期五), ISO "2021-03-05", partial dates
  "March 5" (→ 3月5日) and "March 2021" (→ 2021年3月);
- numbers 0–999,999 in British and American words and in digits with or without
  thousands commas: "one thousand two hundred and thirty-four" → 一千二百三十四;
- times of the 24-hour clock as "3:15 pm", "15:15", "three fifteen pm", "quarter past
  three in the afternoon" → 下午三点十五分.

The Chinese conventions are listed in `transformer_zoo.train.builtin.chinese`.

Splits never share a source string. Sources are unique within a category and each
split takes its share of every category (dates 40%, numbers 35%, times 25%; the
times category has only 10,675 distinct sources). Targets may repeat across splits:
there are only 1,440 distinct times, so `shared_target_count` reports how many test
targets also occur as training targets.

The task comes in three shapes, one per model family: `pairs` (EncoderDecoder),
`prompt_completions` (DecoderOnly; "source =>" then the target) and `classification`
(EncoderOnly; every source twice, with its translation labelled "correct" and with a
near miss, one changed digit, day, month, weekday, hour or minute, labelled
"incorrect").
"""

from __future__ import annotations

import calendar
import datetime
import random
from dataclasses import dataclass

from transformer_zoo.train.builtin import chinese, english
from transformer_zoo.train.examples import ClassificationExample, PromptCompletion, TranslationPair

CATEGORIES = ("dates", "numbers", "times")
SHARES = {"dates": 0.40, "numbers": 0.35, "times": 0.25}
SPLITS = ("train", "valid", "test")
LABELS = ("incorrect", "correct")  # label id 1 = a correct translation
PROMPT_SEPARATOR = " =>"
YEARS = (1900, 2099)
MAX_NUMBER_DIGITS = 6
DATE_KINDS = (("full", 0.55), ("weekday", 0.25), ("month_day", 0.12), ("year_month", 0.08))


@dataclass(frozen=True)
class _Item:
    source: str
    category: str
    value: tuple  # dates (year, month, day, weekday), numbers (n,), times (hour, minute)

    @property
    def target(self) -> str:
        return _render(self.category, self.value)


def _render(category: str, value: tuple) -> str:
    if category == "dates":
        return chinese.chinese_date(*value)
    if category == "numbers":
        return chinese.chinese_number(*value)
    return chinese.chinese_time(*value)


def _draw_date(rng: random.Random) -> _Item:
    year, month = rng.randint(*YEARS), rng.randint(1, 12)
    day = rng.randint(1, calendar.monthrange(year, month)[1])
    kind = rng.choices([k for k, _ in DATE_KINDS], weights=[w for _, w in DATE_KINDS])[0]
    if kind == "full":
        return _Item(
            rng.choice(english.full_date_forms(year, month, day)), "dates", (year, month, day, None)
        )
    if kind == "weekday":
        weekday = datetime.date(year, month, day).weekday()
        source = rng.choice(english.weekday_date_forms(year, month, day))
        return _Item(source, "dates", (year, month, day, weekday))
    if kind == "month_day":
        return _Item(
            rng.choice(english.month_day_forms(month, day)), "dates", (None, month, day, None)
        )
    return _Item(
        rng.choice(english.year_month_forms(year, month)), "dates", (year, month, None, None)
    )


def _draw_number(rng: random.Random) -> _Item:
    digits = rng.randint(1, MAX_NUMBER_DIGITS)
    n = rng.randrange(10 ** (digits - 1) if digits > 1 else 0, 10**digits)
    if rng.random() < 0.4:
        # Zeros inside a number are where the Chinese rules (零, 十 vs 一十) bite.
        text = str(n)
        n = int(text[0] + "".join("0" if rng.random() < 0.5 else c for c in text[1:]))
    return _Item(rng.choice(english.number_forms(n)), "numbers", (n,))


def _unique_items(draw, rng: random.Random, count: int, category: str) -> list[_Item]:
    items: dict[str, _Item] = {}
    attempts = 0
    while len(items) < count:
        attempts += 1
        if attempts > 20 * count + 1000:
            raise ValueError(f"Cannot draw {count} distinct {category} sources; ask for fewer.")
        item = draw(rng)
        items.setdefault(item.source, item)
    return list(items.values())


def _all_times() -> list[_Item]:
    return [
        _Item(source, "times", (hour, minute))
        for hour in range(24)
        for minute in range(60)
        for source in dict.fromkeys(english.time_forms(hour, minute))
    ]


def _near_miss(category: str, value: tuple, rng: random.Random) -> tuple:
    """The value with one field changed: a digit, the day, month, weekday, hour or minute."""
    if category == "numbers":
        text = str(value[0])
        position = rng.randrange(len(text))
        low = 1 if position == 0 and len(text) > 1 else 0
        digit = rng.choice([str(d) for d in range(low, 10) if str(d) != text[position]])
        return (int(text[:position] + digit + text[position + 1 :]),)
    if category == "times":
        hour, minute = value
        if rng.random() < 0.5:
            return (
                rng.choice([(hour + d) % 24 for d in (-1, 1, 12) + (rng.randrange(1, 24),)]),
                minute,
            )
        return (
            hour,
            rng.choice([(minute + d) % 60 for d in (-1, 1, 10, -10, rng.randrange(1, 60))]),
        )
    year, month, day, weekday = value
    fields = ["month"] + ["year"] * (year is not None) + ["day"] * (day is not None)
    fields += ["weekday"] * (weekday is not None)
    field = rng.choice(fields)
    if field == "year":
        text = str(year)
        position = rng.randrange(4)
        choices = "12" if position == 0 else "0123456789"
        year = int(
            text[:position] + rng.choice(choices.replace(text[position], "")) + text[position + 1 :]
        )
    elif field == "month":
        month = rng.choice([m for m in range(1, 13) if m != month])
        if day is not None:
            day = min(day, calendar.monthrange(year or 2000, month)[1])
    elif field == "day":
        day = rng.choice(
            [d for d in range(1, calendar.monthrange(year or 2000, month)[1] + 1) if d != day]
        )
    else:
        weekday = rng.choice([w for w in range(7) if w != weekday])
    return (year, month, day, weekday)


class DatesZh:
    """The generated English → Chinese dates/numbers/times task (see the module docstring).

    Args:
        seed: the same seed gives the same splits, in the same order.
        train_size: number of training sources.
        valid_size: number of validation sources.
        test_size: number of test sources.

    Example:
    >>> task = DatesZh(seed=0, train_size=300, valid_size=30, test_size=30)
    >>> len(task.pairs("train")), task.pairs("test")[0].category in CATEGORIES
    (300, True)
    """

    name = "dates-zh"

    def __init__(
        self, seed: int = 0, train_size: int = 30000, valid_size: int = 1500, test_size: int = 3000
    ):
        sizes = {"train": train_size, "valid": valid_size, "test": test_size}
        for split, size in sizes.items():
            if not isinstance(size, int) or size < (1 if split == "train" else 0):
                raise ValueError(
                    f"`{split}_size` must be a non-negative integer. Received: {size!r}"
                )
        self.seed = seed
        self.sizes = sizes
        rng = random.Random(seed)
        self._items: dict[str, list[_Item]] = {split: [] for split in SPLITS}
        for category in CATEGORIES:
            quota = {split: round(size * SHARES[category]) for split, size in sizes.items()}
            if category == "times":
                items = _all_times()
                if sum(quota.values()) > len(items):
                    raise ValueError(
                        f"The splits ask for {sum(quota.values())} time sources; only {len(items)} exist."
                    )
                rng.shuffle(items)
            else:
                draw = _draw_date if category == "dates" else _draw_number
                items = _unique_items(draw, rng, sum(quota.values()), category)
            start = 0
            for split in ("test", "valid", "train"):
                self._items[split] += items[start : start + quota[split]]
                start += quota[split]
        for split in SPLITS:
            random.Random(f"{seed}-{split}").shuffle(self._items[split])

    def _split(self, split: str) -> list[_Item]:
        if split not in SPLITS:
            raise ValueError(f"`split` must be one of {SPLITS}. Received: split={split!r}")
        return self._items[split]

    def pairs(self, split: str) -> list[TranslationPair]:
        """English → Chinese translation pairs (EncoderDecoder)."""
        return [TranslationPair(i.source, i.target, i.category) for i in self._split(split)]

    def prompt_completions(self, split: str) -> list[PromptCompletion]:
        """ "source =>" prompts with the Chinese completion (DecoderOnly)."""
        return [
            PromptCompletion(i.source + PROMPT_SEPARATOR, i.target, i.category)
            for i in self._split(split)
        ]

    def classification(self, split: str) -> list[ClassificationExample]:
        """Each source with its translation ("correct") and a near miss ("incorrect")."""
        rng = random.Random(f"{self.seed}-{split}-near-misses")
        examples = []
        for item in self._split(split):
            wrong = _render(item.category, _near_miss(item.category, item.value, rng))
            pair = [
                ClassificationExample("correct", item.source, item.target, item.category),
                ClassificationExample("incorrect", item.source, wrong, item.category),
            ]
            rng.shuffle(pair)
            examples += pair
        return examples

    def shared_target_count(self, split: str = "test") -> dict[str, int]:
        """Per category (and "all"): how many `split` examples have a target that also
        occurs as a training target."""
        train_targets = {i.target for i in self._items["train"]}
        counts = dict.fromkeys(CATEGORIES + ("all",), 0)
        for item in self._split(split):
            if item.target in train_targets:
                counts[item.category] += 1
                counts["all"] += 1
        return counts
