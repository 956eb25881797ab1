import Gateway
import Glibc
import HealthgateTesting
import Posix
import Transforms

// `healthgate` with the test transforms registered, for tests that run (and kill) a real serve;
// with HEALTHGATE_TEST_CLOCK_SHIFT=file its clock is moved by the seconds in that file.
let clock: any WaitClock = getenv("HEALTHGATE_TEST_CLOCK_SHIFT").map { ShiftedClock(file: String(cString: $0)) } ?? SystemClock()
exit(
    CLI.main(
        CommandLine.arguments,
        transforms: TransformRegistry.builders + [CountDistinctTransform.registration, CrashOnTransform.registration], clock: clock))
