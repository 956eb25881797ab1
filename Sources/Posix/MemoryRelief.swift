import CLinux

/// Returns freed heap memory to the system after an outsized request or journal entry: glibc
/// keeps freed arenas otherwise (a small gzip body that inflates to a big one would leave its
/// size resident after its drain).
public enum MemoryRelief {
    public static func giveBack() { hg_give_back_memory() }
}
