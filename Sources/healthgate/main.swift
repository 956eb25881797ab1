import Gateway
import Glibc

exit(CLI.main(CommandLine.arguments))
