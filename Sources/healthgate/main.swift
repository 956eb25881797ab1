import Gateway
import Glibc
import HealthgateCore

// buildCommit and buildDate come from the BuildStamp plugin (Plugins/BuildStamp).
Healthgate.build = BuildStamp(commit: buildCommit, date: buildDate)
exit(CLI.main(CommandLine.arguments))
