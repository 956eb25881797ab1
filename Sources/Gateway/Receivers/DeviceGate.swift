import HealthgateCore
import Posix
import Synchronization
import YAMLConfig
import CanonicalJSON

/// `devices:` on a receiver: the device ids its credentials may write and delete for.
/// `any` (the default when unset), `first_seen` (the first device id that writes is bound, kept
/// in the data dir), or a list of ids and globs (`[alice-iphone, "bob-*"]`).
public enum DeviceBinding: Decodable, Sendable, Equatable {
    case any
    case firstSeen
    case listed([Glob])

    public init(from decoder: any Decoder) throws {
        let node = try decoder.singleValueContainer().decode(YAMLNode.self)
        switch node {
        case .scalar(let s) where s.value == "any" && !s.isQuoted: self = .any
        case .scalar(let s) where s.value == "first_seen" && !s.isQuoted: self = .firstSeen
        case .sequence(let items, _):
            var globs: [Glob] = []
            for item in items {
                guard let s = item.scalar, !s.isNull, !s.value.isEmpty else {
                    throw ConfigValueError("each entry of devices is a device id or a glob, e.g. alice-iphone or \"alice-*\"")
                }
                globs.append(Glob(s.value))
            }
            guard !globs.isEmpty else {
                throw ConfigValueError("an empty devices list would refuse every request; list device ids, or say any or first_seen")
            }
            self = .listed(globs)
        default:
            throw ConfigValueError("devices is any, first_seen, or a list of device ids and globs, e.g. [alice-iphone]")
        }
    }
}

/// Holds a receiver to its `devices:`: a request that writes or deletes for any other device is
/// refused whole (403, nothing stored) and counted. With `first_seen`, the first device id is
/// bound at its first request and kept in `<data_dir>/devices/<receiver>`, so it holds across
/// restarts and reloads; the file is removed to bind anew.
public final class DeviceGate: Sendable {
    let receiver: String
    let binding: DeviceBinding
    let directory: String
    let path: String
    let logger: Logger
    /// `first_seen`'s bound device, once read from its file or bound.
    private let bound = Mutex<(loaded: Bool, device: String?)>((false, nil))

    public init(receiver: String, binding: DeviceBinding, dataDir: String, logger: Logger) {
        self.receiver = receiver
        self.binding = binding
        self.directory = FileIO.join(dataDir, "devices")
        self.path = FileIO.join(directory, receiver)
        self.logger = logger
    }

    /// nil when `devices` may be written through this receiver; otherwise the answer: 403 with
    /// a problem document, or 503 when a first-seen binding cannot be kept.
    public func refusal(devices: [String]) -> HTTPResponse? {
        guard let (status, detail) = verdict(devices) else { return nil }
        return status == 403
            ? problem(403, "Device not allowed", detail)
            : problem(503, "Cannot store the data now", detail, headers: [HTTPHeader("Retry-After", "30")])
    }

    /// With `first_seen` and nothing bound yet, the one device of the request is bound (a first
    /// request for several devices binds none and is refused).
    private func verdict(_ devices: [String]) -> (Int, String)? {
        switch binding {
        case .any:
            return nil
        case .listed(let globs):
            guard let other = devices.first(where: { d in !globs.contains { $0.matches(d) } }) else { return nil }
            return (
                403,
                "Receiver \(receiver) takes data only for the devices listed in its config "
                    + "(receivers.\(receiver).devices: \(globs.map(\.pattern).joined(separator: ", "))); this request is for "
                    + "device \(QuarantinedRecord.name(other)). Nothing of it was kept."
            )
        case .firstSeen:
            return bound.withLock { state -> (Int, String)? in
                if !state.loaded {
                    state.device = (try? FileIO.readAll(path)).map { String(decoding: $0, as: UTF8.self) }.flatMap {
                        $0.hasSuffix("\n") ? String($0.dropLast()) : nil
                    }
                    state.loaded = true
                }
                if let device = state.device {
                    guard let other = devices.first(where: { $0 != device }) else { return nil }
                    return (
                        403,
                        "Receiver \(receiver) is bound to device \(QuarantinedRecord.name(device)), the first that wrote "
                            + "to it (devices: first_seen); this request is for device \(QuarantinedRecord.name(other)). "
                            + "Nothing of it was kept. Give each phone its own receiver and token, or list the devices under "
                            + "receivers.\(receiver).devices."
                    )
                }
                guard let first = devices.first else { return nil }
                if devices.contains(where: { $0 != first }) {
                    return (
                        403,
                        "Receiver \(receiver) binds the first device that writes to it (devices: first_seen), and this "
                            + "first request is for several devices. Nothing of it was kept."
                    )
                }
                do {
                    try FileIO.makeDirectories(directory, mode: 0o700)
                    try FileIO.writeAtomically(path, Array((first + "\n").utf8), mode: 0o600)
                } catch {
                    logger.error("cannot keep the bound device in \(path): \(error); the request is refused")
                    return (
                        503,
                        "The gateway could not record which device this receiver is bound to. "
                            + "Nothing of this request was kept; send it again later."
                    )
                }
                state.device = first
                logger.warning(
                    "bound to device \(QuarantinedRecord.name(first)), the first that wrote to it "
                        + "(devices: first_seen): requests for other devices are refused from now on")
                return nil
            }
        }
    }
}
