fn main() {
    eprintln!("prestop-clean: not built yet");
    std::process::exit(2);
}
