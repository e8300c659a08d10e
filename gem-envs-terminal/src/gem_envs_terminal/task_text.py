"""Text-processing tasks: count, sort, filter, replace, extract."""

from __future__ import annotations

import json
import random
from collections import Counter

from gem_envs_terminal.tasks import WORDS, Task, task, text_is, words


@task("line_count", "text")
def line_count(rng: random.Random) -> Task:
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(1, 6))) for _ in range(rng.randint(20, 80))]
    return Task("Write the number of lines of book.txt into answer.txt.", {"book.txt": "\n".join(lines) + "\n"},
                lambda ws, probe: text_is(ws, "answer.txt", str(len(lines))), ("wc -l < book.txt > answer.txt",))


@task("most_common_word", "text")
def most_common_word(rng: random.Random) -> Task:
    pool = words(rng, 8)
    counts = dict(zip(pool, rng.sample(range(1, 30), 8)))
    text = [w for w, n in counts.items() for _ in range(n)]
    rng.shuffle(text)
    top = max(counts, key=counts.get)
    return Task("words.txt has one word per line. Write the most frequent word into answer.txt.",
                {"words.txt": "\n".join(text) + "\n"}, lambda ws, probe: text_is(ws, "answer.txt", top),
                ("sort words.txt | uniq -c | sort -rn | head -n 1 | awk '{print $2}' > answer.txt",))


@task("sort_numbers", "text")
def sort_numbers(rng: random.Random) -> Task:
    nums = [rng.randint(-500, 5000) for _ in range(30)]
    return Task("numbers.txt has one integer per line. Write them sorted numerically, smallest first, one per line, "
                "into sorted.txt.", {"numbers.txt": "\n".join(map(str, nums)) + "\n"},
                lambda ws, probe: text_is(ws, "sorted.txt", "\n".join(map(str, sorted(nums)))),
                ("sort -n numbers.txt > sorted.txt",))


@task("dedupe_lines", "text")
def dedupe_lines(rng: random.Random) -> Task:
    lines = rng.choices(words(rng, 7), k=25)
    first = list(dict.fromkeys(lines))
    return Task("Write the lines of names.txt into unique.txt without duplicates, keeping the first occurrence of "
                "each, in the original order.", {"names.txt": "\n".join(lines) + "\n"},
                lambda ws, probe: text_is(ws, "unique.txt", "\n".join(first)),
                ("awk '!seen[$0]++' names.txt > unique.txt",))


@task("grep_errors", "text")
def grep_errors(rng: random.Random) -> Task:
    levels = rng.choices(["INFO", "WARN", "ERROR", "DEBUG"], weights=[5, 2, 2, 2], k=40)
    log = [f"2026-01-{i % 28 + 1:02d} {lvl} {rng.choice(WORDS)} {rng.randint(0, 999)}" for i, lvl in enumerate(levels)]
    if "ERROR" not in levels:
        log.append("2026-02-01 ERROR final 1")
    errors = [line for line in log if " ERROR " in line]
    return Task("Copy the lines of app.log whose level is ERROR, in order, into errors.txt.",
                {"app.log": "\n".join(log) + "\n"}, lambda ws, probe: text_is(ws, "errors.txt", "\n".join(errors)),
                ("grep ' ERROR ' app.log > errors.txt",))


@task("csv_sum", "text")
def csv_sum(rng: random.Random) -> Task:
    rows = [(rng.choice(WORDS), rng.randint(1, 500)) for _ in range(rng.randint(8, 20))]
    csv = "item,amount\n" + "".join(f"{a},{b}\n" for a, b in rows)
    return Task("sales.csv has a header line and columns item,amount. Write the sum of the amount column into "
                "answer.txt.", {"sales.csv": csv},
                lambda ws, probe: text_is(ws, "answer.txt", str(sum(b for _, b in rows))),
                ("awk -F, 'NR>1 {s+=$2} END {print s}' sales.csv > answer.txt",))


@task("replace_word", "text")
def replace_word(rng: random.Random) -> Task:
    old, new = words(rng, 2)
    body = [" ".join(rng.choice([old, *words(rng, 3)]) for _ in range(6)) for _ in range(8)]
    body[0] += f" {old}"
    text = "\n".join(body) + "\n"
    return Task(f"In doc.txt, replace every occurrence of the word {old} with {new}, editing the file in place.",
                {"doc.txt": text}, lambda ws, probe: float(ws.text("doc.txt") == text.replace(old, new)),
                (f"sed -i 's/{old}/{new}/g' doc.txt",))


@task("uppercase", "text")
def uppercase(rng: random.Random) -> Task:
    text = "\n".join(" ".join(words(rng, 4)) for _ in range(5)) + "\n"
    return Task("Write the contents of shout.txt in upper case into loud.txt.", {"shout.txt": text},
                lambda ws, probe: float(ws.text("loud.txt") == text.upper()),
                ("tr 'a-z' 'A-Z' < shout.txt > loud.txt",))


@task("json_field", "text")
def json_field(rng: random.Random) -> Task:
    version = f"{rng.randint(0, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 99)}"
    config = {"name": rng.choice(WORDS), "build": {"version": version, "debug": rng.random() < 0.5},
              "tags": words(rng, 3)}
    return Task("config.json holds a build object; write the value of build.version (no quotes) into answer.txt.",
                {"config.json": json.dumps(config, indent=2)}, lambda ws, probe: text_is(ws, "answer.txt", version),
                # python3 rather than jq: jq is not on every host
                ("python3 -c \"import json; print(json.load(open('config.json'))['build']['version'])\" > answer.txt",))


@task("reverse_lines", "text")
def reverse_lines(rng: random.Random) -> Task:
    lines = [f"{i}: {w}" for i, w in enumerate(rng.choices(WORDS, k=12))]
    return Task("Write the lines of steps.txt in reverse order (last line first) into reversed.txt.",
                {"steps.txt": "\n".join(lines) + "\n"},
                lambda ws, probe: text_is(ws, "reversed.txt", "\n".join(reversed(lines))),
                ("tac steps.txt > reversed.txt",))


@task("extract_emails", "text")
def extract_emails(rng: random.Random) -> Task:
    people = words(rng, 6)
    emails = [f"{p}@{rng.choice(['example.com', 'mail.org'])}" for p in people]
    lines = [f"Contact {p.title()} at {e} for details." for p, e in zip(people, emails)]
    lines += [f"{rng.choice(WORDS)} notes without an address" for _ in range(4)]
    rng.shuffle(lines)
    return Task("Extract every e-mail address in contacts.txt and write them sorted alphabetically, one per line, "
                "into emails.txt.", {"contacts.txt": "\n".join(lines) + "\n"},
                lambda ws, probe: text_is(ws, "emails.txt", "\n".join(sorted(emails))),
                ("grep -oE '[a-z]+@[a-z.]+[a-z]' contacts.txt | sort > emails.txt",))


@task("csv_filter", "text")
def csv_filter(rng: random.Random) -> Task:
    rows = [(w, rng.choice(["active", "inactive"]), rng.randint(18, 80)) for w in words(rng, 10)]
    header = "name,status,age"
    csv = header + "\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows)
    active = [f"{a},{b},{c}" for a, b, c in rows if b == "active"]
    return Task("users.csv has the columns name,status,age. Write the header line and the rows whose status is "
                "active, in order, into active.csv.", {"users.csv": csv},
                lambda ws, probe: text_is(ws, "active.csv", "\n".join([header, *active])),
                ("awk -F, 'NR==1 || $2==\"active\"' users.csv > active.csv",))


@task("word_counts", "text")
def word_counts(rng: random.Random) -> Task:
    text = " ".join(rng.choices(words(rng, 5), k=40))
    counts = Counter(text.split())
    expected = "\n".join(f"{w} {counts[w]}" for w in sorted(counts))
    return Task("Count how often each word occurs in essay.txt and write lines 'word count' sorted by word into "
                "counts.txt.", {"essay.txt": text + "\n"}, lambda ws, probe: text_is(ws, "counts.txt", expected),
                ("tr ' ' '\\n' < essay.txt | sort | uniq -c | awk '{print $2, $1}' > counts.txt",))
