//! Generates the gRPC code from `proto/` with the vendored protoc (no system tool needed).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "../../proto/distillery/v1/cluster.proto";
    println!("cargo:rerun-if-changed={proto}");
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    tonic_prost_build::configure().compile_with_config(config, &[proto], &["../../proto"])?;
    Ok(())
}
