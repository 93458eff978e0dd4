fn main() -> std::process::ExitCode {
    pincer::cli::main()
}
