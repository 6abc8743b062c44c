import Synchronization

/// Clients whose commands wait, and the pause of CLIENT PAUSE.
///
/// Two kinds of client wait, as in Redis: one whose command a pause holds back (*postponed*: the command has not
/// run, and runs when the pause ends), and one that WAIT blocks (*waiting*: the command ran, and its reply comes
/// at its timeout or with CLIENT UNBLOCK). While a client waits, its connection keeps reading but runs nothing
/// more. Each client is released on its own event loop, through its ``SessionOutlet``.
package final class BlockedClients: Sendable {
    /// What a pause holds back.
    package enum PauseMode: UInt8, Sendable {
        case none = 0
        /// Commands that write (or may propagate, as PUBLISH), and EXEC of a transaction with any.
        case write = 1
        /// Every command.
        case all = 2
    }

    /// Why a waiting client is released.
    package enum Release: Sendable {
        /// The pause ended: the held command runs now.
        case resume
        /// WAIT's timeout passed, or CLIENT UNBLOCK ... TIMEOUT: WAIT answers as at its timeout.
        case timeout
        /// CLIENT UNBLOCK ... ERROR.
        case error
    }

    private struct State {
        var mode = PauseMode.none
        /// When the pause ends, in the server clock's milliseconds.
        var end: Int64 = 0
        /// Clients the pause holds, in the order they arrived (they resume in that order).
        var postponed: [(id: Int, outlet: any SessionOutlet)] = []
        /// Clients WAIT blocks, by id.
        var waiting: [Int: any SessionOutlet] = [:]
        /// Of ``waiting``, those with a timeout (INFO's `clients_in_timeout_table`).
        var timed: Set<Int> = []
    }

    private let state = Mutex(State())
    /// The pause's mode, read before every command: nonzero while a pause may be in effect. A relaxed load.
    private let mode = Atomic<UInt8>(0)
    /// The pause's end, beside ``mode``: a read under a WRITE pause passes without the lock.
    private let endTime = Atomic<Int64>(0)

    package init() {}

    /// Whether a pause may be in effect (it may also have just ended): one relaxed load, for the command path.
    @inline(__always)
    package var mayBePaused: Bool { mode.load(ordering: .relaxed) != 0 }

    /// Starts a pause until `end`, or extends the one in effect: as in Redis, the stricter mode and the later
    /// end of the two hold.
    package func pause(_ newMode: PauseMode, until end: Int64, now: Int64) {
        let released = state.withLock { s -> [any SessionOutlet] in
            // A pause that has run out but was not noticed yet ends first: the new one does not inherit it.
            let released = s.mode != .none && now >= s.end ? endPause(&s) : []
            if newMode.rawValue > s.mode.rawValue { s.mode = newMode }
            s.end = max(s.end, end)
            endTime.store(s.end, ordering: .relaxed)
            mode.store(s.mode.rawValue, ordering: .relaxed)
            return released
        }
        Self.resume(released)
    }

    /// Ends the pause in effect, if any (CLIENT UNPAUSE): the clients it held run their commands.
    package func unpause() {
        let released = state.withLock { s in endPause(&s) }
        Self.resume(released)
    }

    /// The mode of the pause in effect at `now` (`.none` when there is none); a pause found to have run out
    /// ends here.
    package func pauseMode(now: Int64) -> PauseMode {
        guard mayBePaused else { return .none }
        let (current, released) = state.withLock { s -> (PauseMode, [any SessionOutlet]) in
            if s.mode != .none && now >= s.end { return (.none, endPause(&s)) }
            return (s.mode, [])
        }
        Self.resume(released)
        return current
    }

    /// When the pause in effect ends, or nil when there is none at `now` (a pause that has run out ends here).
    package func pauseEnd(now: Int64) -> Int64? {
        guard pauseMode(now: now) != .none else { return nil }
        return state.withLock { s in s.mode == .none ? nil : s.end }
    }

    /// Holds client `id` back if the pause in effect at `now` applies to its command (`writes`: the command
    /// writes or may propagate). Deciding and queuing the client are one step, so that an UNPAUSE cannot come
    /// between them and leave the client held. Returns when the pause ends, or nil when the command may run.
    package func postpone(_ id: Int, outlet: any SessionOutlet, writes: Bool, now: Int64) -> Int64? {
        // A command a WRITE pause lets through, while it lasts, does not take the lock that every loop shares.
        if !writes && mode.load(ordering: .relaxed) == PauseMode.write.rawValue && now < endTime.load(ordering: .relaxed) {
            return nil
        }
        let (end, released) = state.withLock { s -> (Int64?, [any SessionOutlet]) in
            guard s.mode != .none else { return (nil, []) }
            if now >= s.end { return (nil, endPause(&s)) }
            guard s.mode == .all || writes else { return (nil, []) }
            s.postponed.append((id, outlet))
            return (s.end, [])
        }
        Self.resume(released)
        return end
    }

    /// Records client `id` as blocked by WAIT (`timed`: with a timeout).
    package func wait(_ id: Int, outlet: any SessionOutlet, timed: Bool) {
        state.withLock { s in
            s.waiting[id] = outlet
            if timed { s.timed.insert(id) }
        }
    }

    /// Takes client `id` off the clients WAIT blocks; whether it was on it. Whoever takes it releases it, so a
    /// timeout and a CLIENT UNBLOCK at the same moment release it once.
    package func endWait(_ id: Int) -> Bool {
        state.withLock { s in
            s.timed.remove(id)
            return s.waiting.removeValue(forKey: id) != nil
        }
    }

    /// CLIENT UNBLOCK: releases client `id` if WAIT blocks it. A client a pause holds is not released (Redis
    /// 7.2's rule; 7.0 fails an assertion). Whether a client was released.
    package func unblock(_ id: Int, _ release: Release) -> Bool {
        let outlet = state.withLock { s -> (any SessionOutlet)? in
            s.timed.remove(id)
            return s.waiting.removeValue(forKey: id)
        }
        guard let outlet else { return false }
        outlet.release(release)
        return true
    }

    /// Forgets client `id` (its connection closed).
    package func remove(_ id: Int) {
        state.withLock { s in
            s.waiting.removeValue(forKey: id)
            s.timed.remove(id)
            s.postponed.removeAll { $0.id == id }
        }
    }

    /// Clients blocked or held (INFO's `blocked_clients`), and those of them with a timeout
    /// (`clients_in_timeout_table`).
    package var counts: (blocked: Int, timed: Int) {
        state.withLock { s in (s.waiting.count + s.postponed.count, s.timed.count) }
    }

    private func endPause(_ s: inout State) -> [any SessionOutlet] {
        s.mode = .none
        s.end = 0
        mode.store(0, ordering: .relaxed)
        let released = s.postponed.map(\.outlet)
        s.postponed.removeAll()
        return released
    }

    /// Outside the lock: each client resumes on its own event loop.
    private static func resume(_ released: [any SessionOutlet]) {
        for outlet in released { outlet.release(.resume) }
    }
}
