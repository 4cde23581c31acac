"""autoenv/child/sampling.py: choose_tasks draws a seeded, difficulty-stratified sample."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from autoenv.child.sampling import TaskRef, choose_tasks


def pool(**sizes: int) -> list[TaskRef]:
    """Tasks with the given difficulty counts, e.g. pool(easy=600, hard=100), idx 0.. in order."""
    tasks, idx = [], 0
    for difficulty, size in sizes.items():
        for _ in range(size):
            tasks.append(TaskRef(idx=idx, key=f"task-{idx}", difficulty=difficulty))
            idx += 1
    return tasks


def plain(n: int) -> list[TaskRef]:
    return [TaskRef(idx=i, key=f"task-{i}") for i in range(n)]


def shuffled(tasks: list[TaskRef], seed: int = 99) -> list[TaskRef]:
    out = list(tasks)
    random.Random(seed).shuffle(out)
    return out


def by_difficulty(tasks: list[TaskRef]) -> Counter:
    return Counter(t.difficulty for t in tasks)


def test_deterministic_per_seed():
    tasks = pool(easy=600, medium=300, hard=100)
    assert choose_tasks(tasks, 20, seed=7) == choose_tasks(tasks, 20, seed=7)
    assert choose_tasks(plain(500), 30, seed=7) == choose_tasks(plain(500), 30, seed=7)


def test_different_seeds_differ():
    tasks = pool(easy=600, medium=300, hard=100)
    samples = {tuple(t.idx for t in choose_tasks(tasks, 20, seed=s)) for s in range(5)}
    assert len(samples) == 5


@pytest.mark.parametrize("count", [1, 2, 3, 7, 20, 99, 999])
def test_exact_count_no_duplicates_sorted(count):
    tasks = shuffled(pool(easy=600, medium=300, hard=100))
    chosen = choose_tasks(tasks, count, seed=3)
    assert len(chosen) == count
    assert len({t.idx for t in chosen}) == count
    assert [t.idx for t in chosen] == sorted(t.idx for t in chosen)
    assert all(t in tasks for t in chosen)


def test_proportional_strata():
    tasks = pool(easy=600, medium=300, hard=100)
    for seed in range(5):
        assert by_difficulty(choose_tasks(tasks, 20, seed)) == {"easy": 12, "medium": 6, "hard": 2}


def test_largest_remainder_allocation():
    # Quotas 5.5 / 3.3 / 1.2 -> floors 5/3/1 and the spare task goes to the largest remainder.
    tasks = pool(easy=550, medium=330, hard=120)
    assert by_difficulty(choose_tasks(tasks, 10, seed=1)) == {"easy": 6, "medium": 3, "hard": 1}


def test_every_stratum_gets_one_when_count_allows():
    # A rare stratum whose quota (0.5) rounds to nothing still gets a task.
    tasks = pool(easy=990, rare=10)
    counts = by_difficulty(choose_tasks(tasks, 50, seed=1))
    assert counts == {"easy": 49, "rare": 1}


@pytest.mark.parametrize("count", [3, 4, 5])
def test_every_stratum_gets_one_even_when_the_minimum_overshoots(count):
    tasks = pool(easy=900, medium=90, hard=10)
    counts = by_difficulty(choose_tasks(tasks, count, seed=1))
    assert sum(counts.values()) == count
    assert set(counts) == {"easy", "medium", "hard"}


def test_count_below_number_of_strata_still_exact():
    tasks = pool(a=10, b=10, c=10, d=10)
    chosen = choose_tasks(tasks, 2, seed=5)
    assert len(chosen) == 2 and len({t.idx for t in chosen}) == 2


@pytest.mark.parametrize("count", [1000, 1001, 5000])
def test_count_at_least_len_returns_all_sorted(count):
    tasks = shuffled(pool(easy=600, medium=300, hard=100))
    chosen = choose_tasks(tasks, count, seed=1)
    assert [t.idx for t in chosen] == list(range(1000))


def test_no_difficulty_is_a_plain_seeded_sample():
    tasks = shuffled(plain(200))
    chosen = choose_tasks(tasks, 15, seed=11)
    assert len(chosen) == 15
    assert [t.idx for t in chosen] == sorted(t.idx for t in chosen)
    # One stratum: the draw is random.Random(seed).sample over the tasks in input order.
    expected = sorted(random.Random(11).sample(tasks, 15), key=lambda t: t.idx)
    assert chosen == expected


def test_sample_is_spread_not_the_first_n():
    chosen = choose_tasks(plain(1000), 20, seed=2)
    assert [t.idx for t in chosen] != list(range(20))
    assert max(t.idx for t in chosen) > 100


def test_mixed_none_and_labelled_difficulty():
    tasks = [TaskRef(i, f"k{i}", None if i < 50 else "hard") for i in range(100)]
    counts = by_difficulty(choose_tasks(tasks, 10, seed=4))
    assert counts == {None: 5, "hard": 5}


def test_non_string_difficulty_levels_are_stratified():
    tasks = [TaskRef(i, f"k{i}", i % 2 + 1) for i in range(100)]  # ints 1 and 2
    counts = by_difficulty(choose_tasks(tasks, 10, seed=4))
    assert counts == {1: 5, 2: 5}


def test_empty_pool():
    assert choose_tasks([], 5, seed=0) == []
