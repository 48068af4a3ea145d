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

The Chinese conventions are listed in `transformer_zoo.data.builtin.chinese`.

Splits never share a source string: a hash of the source (and seed) picks its split.
Each split takes its share of every category (dates 40%, numbers 35%, times 25%).
Valid and test sources are distinct; the training split may repeat a source, so that
small families (the 20 one-digit number sources, month-day dates) keep their share of
the generator's draws, except times, whose 10,675 sources are enumerated and used once.
Targets may repeat across splits: there are only 1,440 distinct times, so
`shared_target_count` reports how many test targets also occur as training targets.

The task comes in three shapes, one per model family: `pairs` (EncoderDecoder),
`prompt_completions` (DecoderOnly; "source =>" then the target) and `classification`
(EncoderOnly; every source twice, with its translation labelled "correct" and with a
near miss, one changed digit, day, month, weekday, hour or minute, labelled
"incorrect").
"""

from __future__ import annotations

import calendar
import datetime
import functools
import random
import zlib
from dataclasses import dataclass

from transformer_zoo.data.builtin import chinese, english
from transformer_zoo.data.examples import ClassificationExample, PromptCompletion, TranslationPair

CATEGORIES = ("dates", "numbers", "times")
SHARES = {"dates": 0.40, "numbers": 0.35, "times": 0.25}
SPLITS = ("train", "valid", "test")
LABELS = ("incorrect", "correct")  # label id 1 = a correct translation
PROMPT_SEPARATOR = " =>"
YEARS = (1900, 2099)
MAX_NUMBER_DIGITS = 6
DIGIT_WEIGHTS = (1, 2, 3, 3, 3, 3)  # of 1..6-digit numbers; there are only 10 one-digit ones
DATE_KINDS = (("full", 0.55), ("weekday", 0.25), ("month_day", 0.12), ("year_month", 0.08))


@dataclass(frozen=True)
class _Item:
    source: str
    category: str
    value: tuple  # dates (year, month, day, weekday), numbers (n,), times (hour, minute)

    @functools.cached_property
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
    digits = rng.choices(range(1, MAX_NUMBER_DIGITS + 1), weights=DIGIT_WEIGHTS)[0]
    n = rng.randrange(10 ** (digits - 1) if digits > 1 else 0, 10**digits)
    text, mode = str(n), rng.random()
    if mode < 0.15:
        # Round numbers ("three hundred", "twenty-three thousand") have no tail to read.
        n = int(text[: rng.randint(1, 2)].ljust(len(text), "0"))
    elif mode < 0.45:
        # Zeros inside a number are where the Chinese rules (零, 十 vs 一十) bite.
        n = int(text[0] + "".join("0" if rng.random() < 0.5 else c for c in text[1:]))
    return _Item(rng.choice(english.number_forms(n)), "numbers", (n,))


def _split_of(seed: int, source: str, test_share: float, valid_share: float) -> str:
    """The split a source belongs to, by a hash: a source can never land in two splits."""
    u = zlib.crc32(f"{seed}\x00{source}".encode()) / 2**32
    return "test" if u < test_share else "valid" if u < test_share + valid_share else "train"


def _draw_splits(draw, rng: random.Random, quota: dict, split_of, category: str) -> dict:
    """Draws until every split has its quota: distinct sources for valid and test,
    repeats allowed in train (so that small families, such as the 20 one-digit
    sources, keep their share of the training draws)."""
    items: dict[str, list[_Item]] = {split: [] for split in SPLITS}
    seen: dict[str, set] = {split: set() for split in SPLITS}
    attempts, total = 0, sum(quota.values())
    while any(len(items[s]) < quota[s] for s in SPLITS):
        attempts += 1
        if attempts > 30 * total + 1000:
            raise ValueError(f"Cannot draw {total} {category} examples; ask for fewer.")
        item = draw(rng)
        split = split_of(item.source)
        if len(items[split]) < quota[split] and (
            split == "train" or item.source not in seen[split]
        ):
            items[split].append(item)
            seen[split].add(item.source)
    return items


def _enumerated_splits(items: list[_Item], rng: random.Random, quota: dict, split_of) -> dict:
    """Distinct sources for every split, from an enumeration of all of them."""
    pools: dict[str, list[_Item]] = {split: [] for split in SPLITS}
    for item in items:
        pools[split_of(item.source)].append(item)
    for split in SPLITS:
        if quota[split] > len(pools[split]):
            raise ValueError(
                f"The {split} split asks for {quota[split]} time sources; "
                f"only {len(pools[split])} of the {len(items)} fall in it."
            )
        rng.shuffle(pools[split])
        pools[split] = pools[split][: quota[split]]
    return pools


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
        train_size: number of training examples (a source may repeat).
        valid_size: number of validation sources (distinct).
        test_size: number of test sources (distinct).

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
        total = sum(sizes.values())
        shares = (sizes["test"] / total, sizes["valid"] / total)

        def split_of(source: str) -> str:
            return _split_of(seed, source, *shares)

        self._items: dict[str, list[_Item]] = {split: [] for split in SPLITS}
        for category in CATEGORIES:
            quota = {split: round(size * SHARES[category]) for split, size in sizes.items()}
            if category == "times":
                items = _enumerated_splits(_all_times(), rng, quota, split_of)
            else:
                draw = _draw_date if category == "dates" else _draw_number
                items = _draw_splits(draw, rng, quota, split_of, category)
            for split in SPLITS:
                self._items[split] += items[split]
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
