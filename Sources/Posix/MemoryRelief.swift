import CLinux

/// Returns freed heap memory to the system after an outsized request or journal entry: glibc
/// keeps freed arenas otherwise, and a 30 KB gzip body once left 388 MB resident after its drain.
public enum MemoryRelief {
    public static func giveBack() { hg_give_back_memory() }
}
