"""The address ledger: the start slots one owner grants at the IP addresses it owns.

Each IP address has one owner in a hive, the ring owner of the address string
(``Ring.owner(address)``), and only it grants *start slots* there: a grant lets
its holder (a worker, ``holder`` and its process ``epoch``) start one fetch at
the address at or after ``not_before`` and no later than ``not_before + hold``;
the fetch, bounded by the fetch's total timeout, is over by ``expires``. The
ledger keeps, per address:

- at most ``concurrency`` grants outstanding (granted, neither returned nor
  expired), so no more fetches than that are in flight there at once;
- each grant's ``not_before`` at least ``min_delay`` after the one before it,
  so starts are spaced (a holder starts within ``hold`` of its time, so any
  second sees at most ``(1 + hold) / min_delay + 1`` starts);
- what each holder wants (``ask``: how many grants it would hold, absolute, so
  a resent ask is harmless), served first come first served.

A grant is one start, except a *window*: when one holder alone wants the address,
wants one grant, has seen one host there (``single``: a host with an address of
its own, the common case of the web) and nothing is outstanding, its grant may
be started again and again, one fetch at a time, each start at least
``min_delay`` after the one before (``every``: the holder keeps the spacing),
until ``not_before + hold``. The ledger counts it as one grant outstanding and
spaces the next grant at the address from the window's end, as if the window's
last possible start were a start granted there: the starts at an address stay at
least ``min_delay`` apart at their grant or take times, at most ``concurrency`` in
flight, and a window costs one ask and one grant for as many fetches as its host
makes in it (a one-start grant costs them a fetch). Another holder that asks
meanwhile waits at most the window's ``hold`` more than it would behind a grant.

A grant ends when its holder returns it (the fetch ended, or it went unused) or
when it expires (its holder was killed, or the return was lost). An owner that
starts (again) has lost its ledger and grants nothing until ``quiet_until``
(one grant's life after its start), by when every grant its earlier life gave
has expired. An ask from an epoch older than the holder's newest is stale and
refused; the holder's older grants stay outstanding until they expire. Memory
is bounded: an address with no grant outstanding, no want and its spacing
served is forgotten, so the ledger holds only addresses some holder is using
or waiting for.

Pure: every method takes ``now``; the process shell (hive/procs/addresses.py)
carries asks and grants between workers.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Granted:
    """A grant as it leaves the owner: ``wait`` seconds until it may start (relative, so
    that the holder's clock need not agree with the owner's), then ``hold`` seconds to start."""

    holder: int
    holder_epoch: int
    address: str
    grant_id: int
    wait: float
    hold: float
    every: float = 0.0  # a window's least time between its starts; 0: one start


@dataclass(slots=True)
class _Grant:
    grant_id: int
    holder: int
    holder_epoch: int
    not_before: float
    expires: float


@dataclass(slots=True)
class _Address:
    grants: dict[int, _Grant] = field(default_factory=dict)
    wants: dict[tuple[int, int], int] = field(default_factory=dict)  # (holder, epoch) -> want
    single: set[tuple[int, int]] = field(default_factory=set)  # wanting holders of one host
    last_start: float = float("-inf")


class AddressLedger:
    """The grants an owner has given at its addresses (see the module docstring)."""

    def __init__(self, *, concurrency: int, min_delay: float, hold: float, fetch_life: float,
                 epoch: int, now: float) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.concurrency = concurrency
        self.min_delay = min_delay
        self.hold = hold
        # A grant's whole life: its hold, then the longest a fetch started in it lasts.
        self.life = hold + fetch_life
        self.epoch = epoch
        self.quiet_until = now + self.life + concurrency * min_delay
        self._addresses: dict[str, _Address] = {}
        self._epochs: dict[int, int] = {}  # holder -> its newest epoch seen
        self._next_id = 1
        self._dirty: set[str] = set()  # addresses whose wants changed since the last grant
        self._next_expiry = float("inf")
        self.counts: dict[str, int] = {
            "address/granted": 0, "address/returned": 0, "address/expired": 0,
            "address/stale_asks": 0, "address/unknown_returns": 0, "address/windows": 0,
        }

    def __len__(self) -> int:
        return len(self._addresses)

    def outstanding(self, address: str) -> int:
        entry = self._addresses.get(address)
        return len(entry.grants) if entry is not None else 0

    def ask(self, address: str, holder: int, epoch: int, want: int, returned: list[int],
            owner_epoch: int, now: float, *, single: bool = False) -> bool:
        """Take a holder's grants back and what it wants now (``single``: it has seen one
        host at the address, so a window would do); False if the ask is stale (an older
        epoch of the holder than one already seen), which changes nothing. Returns naming
        another life of this owner (``owner_epoch``) are ignored: those grants were
        forgotten with it."""
        newest = self._epochs.get(holder)
        if newest is not None and epoch < newest:
            self.counts["address/stale_asks"] += 1
            return False
        if newest is None or epoch > newest:
            self._epochs[holder] = epoch
            self._drop_wants(holder, epoch)
        entry = self._addresses.get(address)
        if entry is None:
            if want <= 0:
                return True
            entry = self._addresses[address] = _Address()
        if owner_epoch == self.epoch:
            for grant_id in returned:
                grant = entry.grants.get(grant_id)
                if grant is None or grant.holder != holder:
                    self.counts["address/unknown_returns"] += 1
                    continue
                del entry.grants[grant_id]
                self.counts["address/returned"] += 1
        if want > 0:
            entry.wants[holder, epoch] = min(want, self.concurrency)
        else:
            entry.wants.pop((holder, epoch), None)
        if single:
            entry.single.add((holder, epoch))
        else:
            entry.single.discard((holder, epoch))
        self._dirty.add(address)
        return True

    def _drop_wants(self, holder: int, epoch: int) -> None:
        for address, entry in self._addresses.items():
            for key in [key for key in entry.wants if key[0] == holder and key[1] != epoch]:
                del entry.wants[key]
                self._dirty.add(address)
            entry.single = {key for key in entry.single if key[0] != holder or key[1] == epoch}

    def _tidy(self, address: str, entry: _Address, now: float) -> None:
        """Forget an address nobody holds or wants once its spacing is served (until then it
        is looked at again by the next ``grant``)."""
        if entry.grants or entry.wants:
            return
        entry.single.clear()
        if now >= entry.last_start + self.min_delay:
            del self._addresses[address]
        else:
            self._dirty.add(address)

    def grant(self, now: float) -> list[Granted]:
        """Expire what has run out, then grant what the wants and the limits allow."""
        out: list[Granted] = []
        if now < self.quiet_until:
            return out
        if now >= self._next_expiry:
            self._expire(now)
        dirty, self._dirty = self._dirty, set()
        for address in dirty:
            entry = self._addresses.get(address)
            if entry is not None:
                self._serve(address, entry, now, out)
                self._tidy(address, entry, now)
        return out

    def _expire(self, now: float) -> None:
        self._next_expiry = float("inf")
        for address, entry in self._addresses.items():
            for grant_id, grant in list(entry.grants.items()):
                if grant.expires <= now:
                    del entry.grants[grant_id]
                    self.counts["address/expired"] += 1
                    self._dirty.add(address)
                else:
                    self._next_expiry = min(self._next_expiry, grant.expires)

    def _serve(self, address: str, entry: _Address, now: float, out: list[Granted]) -> None:
        """Grant at one address, first come first served, within its limits (a window to a
        lone holder of one host that wants one); a want met is forgotten (its holder asks
        again for more)."""
        for key, want in list(entry.wants.items()):
            holder, epoch = key
            held = sum(1 for g in entry.grants.values()
                       if g.holder == holder and g.holder_epoch == epoch)
            window = (want == 1 and key in entry.single and len(entry.wants) == 1
                      and not entry.grants and self.min_delay > 0)
            while held < want and len(entry.grants) < self.concurrency:
                start = max(now, entry.last_start + self.min_delay)
                # a window's last start may come at its end: the next grant is spaced from it
                entry.last_start = start + self.hold if window else start
                grant = _Grant(self._next_id, holder, epoch, start, start + self.life)
                self._next_id += 1
                entry.grants[grant.grant_id] = grant
                self._next_expiry = min(self._next_expiry, grant.expires)
                out.append(Granted(holder, epoch, address, grant.grant_id, start - now, self.hold,
                                   self.min_delay if window else 0.0))
                self.counts["address/granted"] += 1
                self.counts["address/windows"] += window
                held += 1
            if held >= want:
                del entry.wants[key]

    def next_due(self, now: float) -> float | None:
        """When ``grant`` may next have something to do: the quiet's end, or the first expiry
        of a grant (at the latest: a grant returned may have been the first; None: only a
        new ask)."""
        if now < self.quiet_until:
            return self.quiet_until if self._addresses else None
        return self._next_expiry if self._next_expiry < float("inf") else None

    def busiest(self, n: int) -> list[tuple[str, int, int]]:
        """The ``n`` addresses with the most grants outstanding and holders waiting:
        (address, outstanding, wanting holders)."""
        rows = [(address, len(e.grants), len(e.wants)) for address, e in self._addresses.items()]
        rows.sort(key=lambda row: (-row[1] - row[2], row[0]))
        return rows[:n]
