import CacheCore
import Foundation
import Synchronization

/// One ACL user. Connections authenticated as a user hold it, and see changes to its rules at once, as in
/// Redis.
package final class AclUser: Sendable {
    package let name: String
    private let state: Mutex<AclUserRules>
    private let restricted: Atomic<Bool>

    init(name: String, rules: AclUserRules, table: CommandTable) {
        self.name = name
        self.state = Mutex(rules)
        self.restricted = Atomic(!rules.isUnrestricted(table: table))
    }

    package var rules: AclUserRules { state.withLock { $0 } }

    /// Replaces the rules; the flag that decides whether commands are checked changes with them, under the
    /// same lock, so that no reader sees new rules with an old flag for long.
    func replace(_ rules: AclUserRules, table: CommandTable) {
        state.withLock {
            $0 = rules
            restricted.store(!rules.isUnrestricted(table: table), ordering: .relaxed)
        }
    }

    /// A user that ACL DELUSER or ACL LOAD removed: off, and allowed nothing, so that a connection still
    /// holding it (one that authenticated as it a moment before it went, or whose pipelined commands are still
    /// running) can do nothing but authenticate again before it is closed.
    func revoke(table: CommandTable) { replace(AclUserRules(table: table), table: table) }

    /// Whether the user's commands are checked: false for a user who may run every command on every key and
    /// channel, as `default` may unless told otherwise. One relaxed load on every command.
    @inline(__always)
    package var isRestricted: Bool { restricted.load(ordering: .relaxed) }
}

/// The server's users: `default` and those ACL SETUSER, `user` lines or the ACL file made.
package final class AclUsers: Sendable {
    package let table: CommandTable
    package let defaultUser: AclUser
    private let users: Mutex<[String: AclUser]>
    private let defaultOpen = Atomic<Bool>(true)
    private let defaultPasswordless = Atomic<Bool>(true)

    package init(table: CommandTable) {
        self.table = table
        defaultUser = AclUser(name: "default", rules: .unrestricted(table: table), table: table)
        users = Mutex(["default": defaultUser])
    }

    /// Whether a new connection is authenticated as `default` without AUTH: it is on and has `nopass`.
    package var defaultAuthenticates: Bool { defaultOpen.load(ordering: .relaxed) }

    /// Whether `default` has `nopass` (protected mode's test).
    package var defaultHasNoPassword: Bool { defaultPasswordless.load(ordering: .relaxed) }

    package func user(named name: String) -> AclUser? { users.withLock { $0[name] } }

    /// Every user, by name (ACL LIST's and USERS' order).
    package var all: [AclUser] { users.withLock { $0.values.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) } } }

    /// The user `name` authenticates as with `password`: an existing user that is on, and whose password it
    /// is (any, with `nopass`).
    package func authenticate(name: UnsafeRawBufferPointer, password: UnsafeRawBufferPointer) -> AclUser? {
        guard let user = user(named: String(decoding: name, as: UTF8.self)) else { return nil }
        let rules = user.rules
        return rules.enabled && rules.accepts(password: password) ? user : nil
    }

    /// ACL SETUSER: applies `rules` to the user `name` (created off, with no permissions, when new). All or
    /// nothing: when a rule is refused, the user is as it was (or not created).
    /// - Throws: the rule refused (all of a selector's) and why; an empty rule for an unmatched parenthesis.
    package func setUser(_ name: String, rules: [[UInt8]], pubsubDefaultAll: Bool) throws(RefusedRule) {
        let merged: [[UInt8]]
        do throws(AclRuleError) {
            merged = try AclUserRules.mergingSelectors(rules)
        } catch {
            throw RefusedRule(rule: [], error: error)
        }
        // Read, changed and stored under the users' lock: two changes at once cannot lose one.
        let result: Result<AclUser, RefusedRule> = users.withLock { users in
            var updated = users[name]?.rules ?? AclUserRules(table: table, allChannels: pubsubDefaultAll)
            for rule in merged {
                do throws(AclRuleError) {
                    try updated.apply(rule, table: table, pubsubDefaultAll: pubsubDefaultAll)
                } catch {
                    return .failure(RefusedRule(rule: rule, error: error))
                }
            }
            if let current = users[name] {
                current.replace(updated, table: table)
                return .success(current)
            }
            let created = AclUser(name: name, rules: updated, table: table)
            users[name] = created
            return .success(created)
        }
        _ = try result.get()
        if name == "default" { noteDefault() }
    }

    /// A rule ACL SETUSER refused, and why.
    package struct RefusedRule: Error {
        package let rule: [UInt8]
        package let error: AclRuleError
    }

    /// Sets `default`'s password as `requirepass` does: its passwords replaced by this one, or `nopass`.
    package func setDefaultPassword(_ password: String) {
        users.withLock { _ in
            var rules = defaultUser.rules
            rules.passwords = []
            rules.noPassword = password.isEmpty
            if !password.isEmpty { rules.passwords = [SHA256.hexDigest(password.utf8)] }
            defaultUser.replace(rules, table: table)
        }
        noteDefault()
    }

    /// ACL DELUSER: removes the users named (never `default`), returning those that existed, revoked.
    package func delete(_ names: [String]) -> [AclUser] {
        users.withLock { users in
            let removed = names.compactMap { users.removeValue(forKey: $0) }
            for user in removed { user.revoke(table: table) }
            return removed
        }
    }

    /// ACL LOAD and startup: replaces every user by those given. `default` keeps its identity (its
    /// connections stay) and takes the rules given for it, or an unrestricted user's when none are. Returns
    /// the users that are gone, whose connections must close.
    package func replaceAll(with given: [(name: String, rules: AclUserRules)]) -> [AclUser] {
        let gone: [AclUser] = users.withLock { users in
            let old = users.values.filter { $0 !== defaultUser }
            for user in old { user.revoke(table: table) }
            users = ["default": defaultUser]
            defaultUser.replace(.unrestricted(table: table), table: table)
            for (name, rules) in given {
                if name == "default" {
                    defaultUser.replace(rules, table: table)
                } else {
                    users[name] = AclUser(name: name, rules: rules, table: table)
                }
            }
            return old
        }
        noteDefault()
        return gone
    }

    /// Adds the users given, or replaces the rules of those that exist (`user` lines at startup).
    package func install(_ given: [(name: String, rules: AclUserRules)]) {
        users.withLock { users in
            for (name, rules) in given {
                if let existing = users[name] {
                    existing.replace(rules, table: table)
                } else {
                    users[name] = AclUser(name: name, rules: rules, table: table)
                }
            }
        }
        noteDefault()
    }

    private func noteDefault() {
        let rules = defaultUser.rules
        defaultOpen.store(rules.enabled && rules.noPassword, ordering: .relaxed)
        defaultPasswordless.store(rules.noPassword, ordering: .relaxed)
    }

    // MARK: ACL files and `user` lines

    /// Why users could not be read: Redis's message, one part per line refused.
    package struct LoadError: Error, CustomStringConvertible, Sendable {
        package let description: String
    }

    /// Reads an ACL file as Redis 7.0 does: one `user <name> <rule> ...` per line, words split at single
    /// spaces, blank lines skipped, every line checked. The error lists every line refused, in Redis's words.
    package func parse(file contents: String, path: String, pubsubDefaultAll: Bool) throws(LoadError)
        -> [(name: String, rules: AclUserRules)]
    {
        var errors = ""
        var parsed: [(name: String, rules: AclUserRules)] = []
        var seen: Set<String> = []
        for (number, rawLine) in contents.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.trimmingCharacters(in: CharacterSet(charactersIn: " \t\r\n"))
            guard !line.isEmpty else { continue }
            let origin = "\(path):\(number + 1)"
            let words = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            guard words[0] == "user" && words.count >= 2 else {
                errors += "\(origin) should start with user keyword followed by the username. "
                continue
            }
            let name = words[1]
            guard !name.utf8.contains(0) else {
                errors += "'\(origin): username '\(name)' contains invalid characters. "
                continue
            }
            guard seen.insert(name).inserted else {
                errors += "WARNING: Duplicate user '\(name)' found on line \(number + 1). "
                continue
            }
            let rules: [[UInt8]]
            do throws(AclRuleError) {
                rules = try AclUserRules.mergingSelectors(words.dropFirst(2).map { Array($0.utf8) })
            } catch {
                errors += "\(origin): Unmatched parenthesis in selector definition."
                continue
            }
            var user = AclUserRules(table: table, allChannels: pubsubDefaultAll)
            var refused = false
            for rule in rules {
                do throws(AclRuleError) {
                    try user.apply(rule, table: table, pubsubDefaultAll: pubsubDefaultAll)
                } catch {
                    errors += "\(origin): Error in applying operation '\(String(decoding: rule, as: UTF8.self))': \(error.message). "
                    refused = true
                    break
                }
            }
            if !refused { parsed.append((name, user)) }
        }
        guard errors.isEmpty else {
            throw LoadError(description: errors + "WARNING: ACL errors detected, no change to the previously active ACL rules was performed")
        }
        return parsed
    }

    /// Reads the configuration's `user <name> <rule> ...` lines.
    package func parse(userLines: [[String]], pubsubDefaultAll: Bool) throws(LoadError) -> [(name: String, rules: AclUserRules)] {
        var parsed: [(name: String, rules: AclUserRules)] = []
        for words in userLines {
            guard let name = words.first else { continue }
            guard !parsed.contains(where: { $0.name == name }) else {
                throw LoadError(description: "Error in user declaration '\(name)': Duplicate user found. A user can only be defined once in config files")
            }
            var user = AclUserRules(table: table, allChannels: pubsubDefaultAll)
            // As Redis: a user that exists already (`default`) is reset before its line applies.
            if name == "default" { try? user.apply(Array("reset".utf8), table: table, pubsubDefaultAll: pubsubDefaultAll) }
            let rules: [[UInt8]]
            do throws(AclRuleError) {
                rules = try AclUserRules.mergingSelectors(words.dropFirst().map { Array($0.utf8) })
            } catch {
                throw LoadError(description: "Error loading ACL rule for the user named '\(name)': \(error.message)")
            }
            for rule in rules {
                do throws(AclRuleError) {
                    try user.apply(rule, table: table, pubsubDefaultAll: pubsubDefaultAll)
                } catch {
                    throw LoadError(
                        description: "Error loading ACL rule '\(String(decoding: rule, as: UTF8.self))' for the user named '\(name)': \(error.message)")
                }
            }
            parsed.append((name, user))
        }
        return parsed
    }

    /// The ACL file's text, or why it cannot be read (the system's words).
    package static func readFile(_ path: String) -> Result<String, LoadError> {
        do {
            return .success(String(decoding: try ConfigurationFile.contents(of: path), as: UTF8.self))
        } catch {
            return .failure(LoadError(description: "\(error)"))
        }
    }

    /// ACL SAVE: every user's line, written to a temporary file then renamed over `path`.
    package func save(to path: String) throws(LoadError) {
        let text = all.map { $0.rules.line(name: $0.name, table: table) + "\n" }.joined()
        let temporary = path + ".tmp-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8)) else {
            throw LoadError(description: "Opening temp ACL file for ACL SAVE: \(String(cString: strerror(errno)))")
        }
        guard rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw LoadError(description: "Renaming ACL file for ACL SAVE: \(reason)")
        }
    }
}
