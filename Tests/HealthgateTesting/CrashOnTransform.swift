import CanonicalJSON
import Glibc
import HealthgateCore
import Posix
import Transforms
import YAMLConfig

/// A test transform that kills the process when it meets the record with uuid `uuid`: with
/// `thread: helper` on a thread the sink's thread starts (as a sink's request or index thread
/// is), else on the sink's thread itself; `how: trap` traps (a failed precondition), else a
/// fatal error (an abort). Registered in `healthgate-testserve` as `crash_on`, for the
/// crash-loop guard's tests: `- crash_on: {uuid: bad-1, thread: helper}`.
public struct CrashOnTransform: TransformSpec {
    let uuid: String
    let onHelper: Bool
    let trap: Bool

    public var kind: String { "crash_on" }

    public func instantiate(_ context: TransformContext) -> any Transform { Instance(spec: self) }

    public static let registration: (name: String, build: TransformRegistry.Builder) = (
        "crash_on",
        { node, path throws(ConfigProblems) in
            guard let uuid = node["uuid"]?.scalar?.value else {
                throw ConfigProblems(problems: [ConfigProblem(location: node.location, path: path, message: "crash_on needs a uuid")])
            }
            return CrashOnTransform(
                uuid: uuid, onHelper: node["thread"]?.scalar?.value == "helper",
                trap: node["how"]?.scalar?.value == "trap")
        }
    )

    final class Instance: Transform {
        let spec: CrashOnTransform
        init(spec: CrashOnTransform) { self.spec = spec }

        func process(_ record: consuming Record, emit: (consuming Record) -> Void) {
            if record.uuid == spec.uuid {
                let trap = spec.trap
                let die = { () -> Void in
                    if trap { precondition(getpid() < 0, "crash_on: trapped") } else { fatalError("crash_on: the record asked for it") }
                }
                if spec.onHelper, case .success(let t) = startThread(die) {
                    pthread_join(t, nil)
                } else {
                    die()
                }
            }
            emit(record)
        }
    }
}
