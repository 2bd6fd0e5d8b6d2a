//! Integration tests of distillery-llm (one binary): the client against a fault-injecting
//! HTTP server on loopback, the response cache on local disk, and both against a real vLLM
//! when `DISTILLERY_VLLM_URL` names one (`.ci/run` starts it with `scripts/vllm-cpu/`).

mod cache;
mod client;
mod pace;
mod packs;
mod vllm;
