"""A query of the corpus index: the threshold algorithm over each term's postings.

A query walks the postings of its terms from the highest count down and ranks the
passages it meets from the postings; it stops as soon as the passage in `limit`-th place
beats anything a passage not met yet could score, or ties with it in a way that only path
and line (the passage number) can decide.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from itertools import compress, filterfalse, repeat
from operator import add, eq, ge, neg, not_, truth

from git_obversa.corpus.index.format import CorruptIndex, Index, Term
from git_obversa.corpus.passages import rank

# Postings read per term per round: a rare term is read in one small round, and the
# chunk doubles so that a long walk down a common term takes few rounds.
FIRST_CHUNK, LAST_CHUNK = 64, 8192
MANY = 1 << 62  # more than any count or number of postings
# A rank: (-exact, -matched, -frequency, passage); the passage number orders ties as path
# and line do.
Rank = tuple[int, int, int, int]


def best(
    index: Index, query_tokens: list[str], limit: int, removed: set[int] | frozenset = frozenset()
) -> list[tuple[str, int, int, str, str]]:
    """The LIMIT best passages for QUERY_TOKENS as (path, start, end, text, words), found
    with the threshold algorithm over each term's postings, highest count first (see
    `ThresholdQuery`). REMOVED passages (of files an overlay holds anew, or that are gone)
    are passed over."""
    return ThresholdQuery(index, query_tokens, limit, removed).run()


class ThresholdQuery:
    """One query's walk down its terms' postings.

    A passage's rank is (exact, matched terms, frequency), then path and line (its number).
    After a term's postings were read down to count c, a passage not met yet holds that
    term at most c times, and not at all once the term's postings are used up. So it can
    match at most the terms not used up, count at most the sum of their c, and be exact
    only if no term is used up. Once the passage in LIMIT-th place ranks strictly above
    that bound, no passage not met yet can enter the LIMIT best. A passage met whose own
    bound (what was read of it, and the terms' bounds for the rest) is already below the
    LIMIT-th is never scored.

    A passage is ranked from the postings: the terms read with it, and the others found
    by bisecting each count group of their postings. Only whether a passage holding every
    term holds them as the exact phrase needs its tokens: that is checked for the passages
    that reach the LIMIT best, and cross-checks the postings (a mismatch is a corrupt
    index).

    Removed passages are passed over as if met and dismissed: they only ever lower what
    is found, never the bound.
    """

    def __init__(
        self, index: Index, query_tokens: list[str], limit: int, removed: set[int] | frozenset
    ) -> None:
        self.index, self.query_tokens, self.limit = index, query_tokens, limit
        self.unique = list(dict.fromkeys(query_tokens))
        self.terms = [term for term in map(index.term, self.unique) if term is not None]
        # Only with several tokens can a passage holding every term be inexact.
        self.phrase = len(query_tokens) > 1
        self.postings = index.postings
        self.position = {term: term.start for term in self.terms}
        self.group = dict.fromkeys(self.terms, 0)  # the group holding the term's next posting
        self.bound = dict.fromkeys(self.terms, MANY)
        self.scored: dict[int, Rank] = {}
        self.unsettled: set[int] = set()  # holding every term, ranked as exact until checked
        # met, but could not rank above the LIMIT-th when met (or removed)
        self.dismissed: set[int] = set(removed)
        self.last = (1, 1, 1)  # the rank (negated) of the LIMIT-th passage so far: none yet
        self.blocks: dict = {}

    def run(self) -> list[tuple[str, int, int, str, str]]:
        """Read the terms' postings round by round until the LIMIT best are known."""
        terms, bound, limit, chunk = self.terms, self.bound, self.limit, FIRST_CHUNK
        reading, size = terms, chunk
        while reading:
            parts = self._read_round(reading, size)
            shared = self._shared(reading, parts)
            fresh = self._bounded_shared(shared, parts)
            self._rank_alone(parts, shared)
            self._score(fresh)
            present = [count for count in bound.values() if count]
            if not present:
                break
            unmet = (-int(len(present) == len(self.unique)), -len(present), -sum(present))
            chunk = min(chunk * 2, LAST_CHUNK)
            reading, size = [term for term in terms if bound[term]], chunk
            if len(self.scored) >= limit:
                last = self.last = self._top(limit)[-1][:3]
                if last < unmet:
                    break
                if last == unmet and (not unmet[0] or not self.phrase):
                    self._score_ties(reading)
                    break
                if last[:2] > unmet[:2]:
                    reading, size = self._shortest(reading)
        found = [self.index.passage(key[3], self.blocks) for key in self._top(limit)]
        self.index.keep(self.blocks, terms)
        return found

    def _read_round(self, reading: list[Term], size: int) -> list[tuple[Term, int, memoryview]]:
        """The next SIZE postings of each term of READING, as (term, count, passages) per
        count group met; each term's position and bound move past them."""
        position, group, bound, postings = self.position, self.group, self.bound, self.postings
        parts = []
        for term in reading:
            at, stop = position[term], min(position[term] + size, term.end)
            number = group[term]
            while at < stop:
                count, group_stop = term.groups[number]
                upto = min(group_stop, stop)
                parts.append((term, count, postings[at:upto]))
                if upto == group_stop:
                    number += 1
                at = upto
            position[term], group[term] = stop, number
            bound[term] = 0 if stop == term.end else term.groups[number][0]
        return parts

    def _shared(self, reading: list[Term], parts: list[tuple[Term, int, memoryview]]) -> set[int]:
        """The passages read this round for two terms or more, not met before: they are
        ranked one by one, the others a part at a time."""
        shared: set[int] = set()
        if len(reading) > 1:
            read: dict[Term, set[int]] = {term: set() for term in reading}
            for term, _, part in parts:
                read[term].update(part)
            sets = list(read.values())
            for number, one in enumerate(sets):
                for other in sets[number + 1 :]:
                    shared |= one & other
            shared.difference_update(self.scored)
            shared.difference_update(self.dismissed)
        return shared

    def _bounded_shared(
        self, shared: set[int], parts: list[tuple[Term, int, memoryview]]
    ) -> list[tuple[int, dict[Term, int]]]:
        """Of SHARED, those that could still rank above the LIMIT-th, with what they hold
        of the terms read this round; the others are dismissed."""
        if not shared:
            return []
        bound, last = self.bound, self.last
        met: dict[int, dict[Term, int]] = {passage: {} for passage in shared}
        for term, count, part in parts:
            for passage in shared.intersection(part):
                met[passage][term] = count
        fresh = []
        for passage, known in met.items():
            # What it holds of a term read this round is known; of any other term, at
            # most that term's bound (it was not among the postings read above it).
            others = [bound[term] for term in self.terms if term not in known and bound[term]]
            matched = len(known) + len(others)
            most = (
                -int(matched == len(self.unique)),
                -matched,
                -sum(known.values()) - sum(others),
            )
            if most > last:
                self.dismissed.add(passage)
            else:
                fresh.append((passage, known))
        return fresh

    def _rank_alone(self, parts: list[tuple[Term, int, memoryview]], shared: set[int]) -> None:
        """Rank, a part at a time, the passages read this round for one term only and not
        met before; a part that cannot rank above the LIMIT-th is dismissed whole."""
        scored, dismissed, bound = self.scored, self.dismissed, self.bound
        for term, count, part in parts:
            unseen = filterfalse(dismissed.__contains__, filterfalse(scored.__contains__, part))
            alone = list(filterfalse(shared.__contains__, unseen) if shared else unseen)
            if not alone:
                continue
            # Each holds COUNT of TERM and, of every other term, at most its bound.
            others = [bound[other] for other in self.terms if other is not term and bound[other]]
            matched = 1 + len(others)
            most = (-int(matched == len(self.unique)), -matched, -count - sum(others))
            if most > self.last:
                dismissed.update(alone)
            else:
                self._score_part(term, count, alone)

    def _score(self, found: Iterable[tuple[int, dict[Term, int]]]) -> None:
        """Rank FOUND, (passage, {term: count} already known) pairs, from the postings."""
        terms, bound, position, postings = self.terms, self.bound, self.position, self.postings
        everything = len(self.unique)
        for passage, known in found:
            matched = frequency = 0
            for term in terms:
                count = known.get(term)
                if count is None:
                    # Not met in what was read of the term: it is in the rest, or nowhere.
                    count = term.count(postings, passage, position[term]) if bound[term] else 0
                matched += count > 0
                frequency += count
            if not matched:
                raise CorruptIndex("a passage lacks the term it is posted under")
            if self.phrase and matched == everything:
                self.unsettled.add(passage)
            self.scored[passage] = (-int(matched == everything), -matched, -frequency, passage)

    def _score_part(self, term: Term, count: int, part: list[int]) -> None:
        """Rank PART, passages that hold TERM COUNT times and were not read for any other
        term, from the other terms' postings, the shortest first. After each term, the
        passages that could not rank above the LIMIT-th whatever they hold of the terms
        not counted yet are dismissed, so the long terms are counted for fewer."""
        bound, position, last = self.bound, self.position, self.last
        others = sorted(
            (other for other in self.terms if other is not term and bound[other]),
            key=lambda other: other.end - position[other],
        )
        everything = len(self.unique)
        matched, frequency = [1] * len(part), [count] * len(part)
        for number, other in enumerate(others):
            column = other.counts(self.postings, part, position[other])
            matched = list(map(add, matched, map(truth, column)))
            frequency = list(map(add, frequency, column))
            rest = others[number + 1 :]
            if not rest or last[0] > 0:
                continue
            needed = self._needed(rest, everything)
            kept = list(map(ge, frequency, map(needed.__getitem__, matched)))
            if not all(kept):
                self.dismissed.update(compress(part, map(not_, kept)))
                part = list(compress(part, kept))
                matched = list(compress(matched, kept))
                frequency = list(compress(frequency, kept))
                if not part:
                    return
        exact = list(map(eq, matched, repeat(everything)))
        keys = zip(map(neg, exact), map(neg, matched), map(neg, frequency), part, strict=True)
        self.scored.update(zip(part, keys, strict=True))
        if self.phrase:
            self.unsettled.update(compress(part, exact))

    def _needed(self, rest: list[Term], everything: int) -> list[int]:
        """By terms matched so far, the frequency a passage needs to still rank above the
        LIMIT-th with REST, the terms not counted yet, left: at best it holds every one of
        them as often as its bound, and is below the LIMIT-th when that is worse, by the
        terms matched or by frequency alone."""
        last = self.last
        most, rest_bound = len(rest), sum(self.bound[later] for later in rest)
        needed = [MANY] * (everything + 1)
        for held in range(1, everything - most + 1):
            best_case = (-int(held + most == everything), -(held + most))
            if best_case < last[:2]:
                needed[held] = 0
            elif best_case == last[:2]:
                needed[held] = -last[2] - rest_bound
        return needed

    def _top(self, limit: int) -> list[Rank]:
        """The LIMIT best scored, after checking the phrase in those of them not checked
        yet (a check can only lower a rank)."""
        scored, unsettled = self.scored, self.unsettled
        heap = list(scored.values())
        heapq.heapify(heap)
        found = []
        while heap and len(found) < limit:
            key = heapq.heappop(heap)
            if key[3] in unsettled:
                unsettled.discard(key[3])
                ranked = rank(self.query_tokens, self.index.words(key[3], self.blocks))
                if ranked is None or (-ranked[1], -ranked[2]) != key[1:3]:
                    raise CorruptIndex("the postings disagree with the passage's tokens")
                if not ranked[0]:
                    scored[key[3]] = key = (0, *key[1:])
                    heapq.heappush(heap, key)
                    continue
            found.append(key)
        return found

    def _score_ties(self, reading: list[Term]) -> None:
        """Score the passages not met yet that tie with the LIMIT-th.

        Such a passage can at best tie, and does exactly when it holds each term not used
        up as often as that term's bound (it cannot be exact: a term is used up, or the
        query is one token, which all of them hold). Path and line decide ties, so of
        those passages only the first LIMIT in that order (passage number) can enter."""
        tied: set[int] | None = None
        for term in reading:
            count, group_stop = term.groups[self.group[term]]
            rest = (
                set(self.postings[self.position[term] : group_stop])
                if count == self.bound[term]
                else set()
            )
            tied = rest if tied is None else tied & rest
        assert tied is not None
        tied.difference_update(self.scored)
        tied.difference_update(self.dismissed)
        self._score((passage, {}) for passage in heapq.nsmallest(self.limit, tied))

    def _shortest(self, reading: list[Term]) -> tuple[list[Term], int]:
        """Only using up a term can lower the bound enough: the shortest term of READING
        to read to its end, and how much of it."""
        left, _, term = min(
            (term.end - self.position[term], number, term) for number, term in enumerate(reading)
        )
        return [term], min(left, LAST_CHUNK)
