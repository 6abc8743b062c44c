import NIOCore
import Synchronization

/// The connections of one event loop whose replies wait for the end of the loop's current round of reads.
///
/// As Redis does (it writes replies in `beforeSleep`, once every ready client has been read), the replies to
/// everything one wake-up of the loop read are sent together when that round is over, rather than each right
/// after its read: a client with many connections then finds many replies at once, and wakes up less often.
/// Used only on its event loop.
final class ReplyBatch: @unchecked Sendable {
    private let eventLoop: any EventLoop
    private var waiting: [ConnectionHandler] = []
    private var sending: [ConnectionHandler] = []
    private var scheduled = false

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    /// Sends `handler`'s replies once the loop has handled the rest of what it is handling now.
    func add(_ handler: ConnectionHandler) {
        waiting.append(handler)
        guard !scheduled else { return }
        scheduled = true
        // Tasks run after the loop has handled every ready channel.
        eventLoop.assumeIsolated().execute { self.send() }
    }

    private func send() {
        scheduled = false
        swap(&waiting, &sending)
        for handler in sending { handler.sendBatchedReplies() }
        sending.removeAll(keepingCapacity: true)
    }
}

/// One ``ReplyBatch`` per event loop.
final class ReplyBatches: Sendable {
    private let batches = Mutex<[ObjectIdentifier: ReplyBatch]>([:])

    /// The batch of `eventLoop` (made on first use).
    func batch(for eventLoop: any EventLoop) -> ReplyBatch {
        batches.withLock { batches in
            let key = ObjectIdentifier(eventLoop)
            if let batch = batches[key] { return batch }
            let batch = ReplyBatch(eventLoop: eventLoop)
            batches[key] = batch
            return batch
        }
    }
}
