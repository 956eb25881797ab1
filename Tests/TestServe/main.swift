import Gateway
import Glibc
import HealthgateTesting
import Transforms

// `healthgate` with the test transforms registered, for tests that run (and kill) a real serve.
exit(CLI.main(CommandLine.arguments, transforms: TransformRegistry.builders + [CountDistinctTransform.registration]))
