"""File-manipulation tasks: create, move, copy, delete, link, permissions, find."""

from __future__ import annotations

import random

from gem_envs_terminal.tasks import Task, all_of, task, text_is, words


@task("create_file", "files")
def create_file(rng: random.Random) -> Task:
    name, word = words(rng, 2)
    line = f"{word} {rng.randint(100, 999)}"
    return Task(f"Create a file named {name}.txt whose only line is: {line}", {},
                lambda ws, probe: text_is(ws, f"{name}.txt", line), (f"echo '{line}' > {name}.txt",))


@task("make_dirs", "files")
def make_dirs(rng: random.Random) -> Task:
    a, b, c = words(rng, 3)
    return Task(f"Create the directory {a}/{b}/{c} (with its parents) and an empty file {a}/{b}/{c}/.keep in it.", {},
                lambda ws, probe: all_of(ws.is_dir(f"{a}/{b}/{c}"), ws.files.get(f"{a}/{b}/{c}/.keep") == b""),
                (f"mkdir -p {a}/{b}/{c}", f"touch {a}/{b}/{c}/.keep"))


@task("rename_file", "files")
def rename_file(rng: random.Random) -> Task:
    old, new = words(rng, 2)
    body = f"id={rng.randint(1000, 9999)}\n"
    return Task(f"Rename {old}.txt to {new}.txt (keep its contents).", {f"{old}.txt": body},
                lambda ws, probe: all_of(not ws.exists(f"{old}.txt"), ws.text(f"{new}.txt") == body),
                (f"mv {old}.txt {new}.txt",))


@task("backup_copy", "files")
def backup_copy(rng: random.Random) -> Task:
    names = words(rng, 3)
    files = {f"{n}.conf": f"{n}={rng.randint(0, 99)}\n" for n in names}
    return Task("Copy every .conf file into a new directory backup/, leaving the originals in place.", files,
                lambda ws, probe: all_of(*(ws.text(p) == d and ws.text(f"backup/{p}") == d for p, d in files.items())),
                ("mkdir -p backup", "cp *.conf backup/"))


@task("delete_tmp", "files")
def delete_tmp(rng: random.Random) -> Task:
    names = words(rng, 6)
    keep = {f"{n}.txt": n for n in names[:3]}
    junk = {f"{n}.tmp": "x" for n in names[3:5]} | {f"cache/{names[5]}.tmp": "x"}
    return Task("Delete every file ending in .tmp anywhere in the workspace; keep everything else.", keep | junk,
                lambda ws, probe: all_of(not any(p.endswith(".tmp") for p in ws.files),
                                         *(ws.text(p) == d for p, d in keep.items())),
                ("find . -name '*.tmp' -type f -delete",))


@task("sort_by_extension", "files")
def sort_by_extension(rng: random.Random) -> Task:
    names = words(rng, 6)
    logs = {f"{n}.log": f"log {n}\n" for n in names[:3]}
    others = {f"{n}.csv": f"a,b\n{n},1\n" for n in names[3:]}
    return Task("Move every .log file into a directory logs/ and every .csv file into data/.", logs | others,
                lambda ws, probe: all_of(*(ws.text(f"logs/{p}") == d and not ws.exists(p) for p, d in logs.items()),
                                         *(ws.text(f"data/{p}") == d and not ws.exists(p) for p, d in others.items())),
                ("mkdir -p logs data", "mv *.log logs/", "mv *.csv data/"))


@task("make_executable", "files")
def make_executable(rng: random.Random) -> Task:
    name = words(rng, 1)[0]
    return Task(f"Make the script {name}.sh executable.", {f"{name}.sh": "#!/bin/sh\necho ready\n"},
                lambda ws, probe: float(f"{name}.sh" in ws.executable), (f"chmod +x {name}.sh",))


@task("symlink_latest", "files")
def symlink_latest(rng: random.Random) -> Task:
    versions = sorted(rng.sample(range(1, 20), 3))
    files = {f"releases/v{v}.txt": f"version {v}\n" for v in versions}
    target = f"releases/v{versions[-1]}.txt"
    return Task("Create a symbolic link named latest in the workspace root that points to the highest-numbered "
                "release file in releases/ (use a relative target).", files,
                lambda ws, probe: float(ws.links.get("latest") in (target, f"./{target}")),
                (f"ln -s {target} latest",))


@task("concatenate_parts", "files")
def concatenate_parts(rng: random.Random) -> Task:
    chunks = [f"{w} {rng.randint(0, 99)}\n" for w in words(rng, 4)]
    files = {f"part{i + 1}.txt": c for i, c in enumerate(chunks)}
    return Task("Concatenate part1.txt, part2.txt, part3.txt and part4.txt, in that order, into whole.txt.", files,
                lambda ws, probe: float(ws.text("whole.txt") == "".join(chunks)),
                ("cat part1.txt part2.txt part3.txt part4.txt > whole.txt",))


@task("largest_file", "files")
def largest_file(rng: random.Random) -> Task:
    names = words(rng, 5)
    sizes = rng.sample(range(10, 400), 5)
    files = {f"data/{n}.bin": "x" * s for n, s in zip(names, sizes)}
    biggest = max(files, key=lambda p: len(files[p])).split("/")[1]
    return Task("Write the name (just the file name, e.g. foo.bin) of the largest file in data/ into answer.txt.",
                files,
                lambda ws, probe: text_is(ws, "answer.txt", biggest),
                ("ls -S data | head -n 1 > answer.txt",))


@task("count_files", "files")
def count_files(rng: random.Random) -> Task:
    files = {}
    for _ in range(rng.randint(5, 12)):
        depth = rng.randint(0, 2)
        path = "/".join(["tree", *words(rng, depth), f"f{rng.randint(0, 10**6)}.txt"])
        files[path] = "."
    return Task("Count the regular files anywhere under tree/ and write the number into answer.txt.", files,
                lambda ws, probe: text_is(ws, "answer.txt", str(len(files))),
                ("find tree -type f | wc -l > answer.txt",))


@task("remove_empty", "files")
def remove_empty(rng: random.Random) -> Task:
    names = words(rng, 6)
    full = {f"{n}.txt": f"{n}\n" for n in names[:3]}
    empty = {f"{n}.txt": "" for n in names[3:]}
    return Task("Delete every empty file in the workspace root; keep the others.", full | empty,
                lambda ws, probe: all_of(*(not ws.exists(p) for p in empty),
                                         *(ws.text(p) == d for p, d in full.items())),
                ("find . -maxdepth 1 -type f -empty -delete",))
