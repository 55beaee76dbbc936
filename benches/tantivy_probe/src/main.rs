//! tantivy 0.24 on pre-analyzed text (bm25s's stems joined by spaces): index build time and size,
//! top-k search throughput (its block-max WAND over a union of term queries), and the run written
//! as TREC so that its top k can be compared with bm25s's. Its BM25 is k1 1.2, b 0.75 (constants).
use std::io::{BufRead, Write};
use std::time::Instant;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING,
};
use tantivy::tokenizer::{TextAnalyzer, WhitespaceTokenizer};
use tantivy::{doc, Index, TantivyDocument, Term};

fn main() -> tantivy::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    let (corpus, queries, dir, out, k) =
        (&a[1], &a[2], &a[3], &a[4], a[5].parse::<usize>().unwrap());
    let mut sb = Schema::builder();
    let idx_opts = TextFieldIndexing::default()
        .set_tokenizer("ws")
        .set_index_option(IndexRecordOption::WithFreqs);
    let body = sb.add_text_field(
        "body",
        TextOptions::default().set_indexing_options(idx_opts),
    );
    let pid = sb.add_text_field("pid", STRING | STORED);
    let schema = sb.build();
    std::fs::create_dir_all(dir)?;
    let index = Index::create_in_dir(dir, schema)?;
    index.tokenizers().register(
        "ws",
        TextAnalyzer::builder(WhitespaceTokenizer::default()).build(),
    );
    let t0 = Instant::now();
    let mut w = index.writer_with_num_threads(1, 500_000_000)?;
    for line in std::io::BufReader::new(std::fs::File::open(corpus)?).lines() {
        let line = line?;
        let (p, text) = line.split_once('\t').unwrap();
        w.add_document(doc!(pid => p, body => text))?;
    }
    w.commit()?;
    w.wait_merging_threads()?;
    let build = t0.elapsed().as_secs_f64();
    let size: u64 = std::fs::read_dir(dir)?
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let reader = index.reader()?;
    let searcher = reader.searcher();
    let qs: Vec<(String, String)> = std::io::BufReader::new(std::fs::File::open(queries)?)
        .lines()
        .map(|l| {
            let l = l.unwrap();
            let (q, t) = l.split_once('\t').unwrap();
            (q.to_string(), t.to_string())
        })
        .collect();
    let mut f = std::io::BufWriter::new(std::fs::File::create(out)?);
    let t1 = Instant::now();
    let mut results = Vec::with_capacity(qs.len());
    for (qid, text) in &qs {
        let clauses: Vec<(Occur, Box<dyn Query>)> = text
            .split_whitespace()
            .map(|t| {
                (
                    Occur::Should,
                    Box::new(TermQuery::new(
                        Term::from_field_text(body, t),
                        IndexRecordOption::WithFreqs,
                    )) as Box<dyn Query>,
                )
            })
            .collect();
        if clauses.is_empty() {
            continue;
        }
        results.push((
            qid,
            searcher.search(&BooleanQuery::new(clauses), &TopDocs::with_limit(k))?,
        ));
    }
    let search = t1.elapsed().as_secs_f64();
    for (qid, top) in results {
        for (rank, (score, addr)) in top.iter().enumerate() {
            let d: TantivyDocument = searcher.doc(*addr)?;
            let p = d.get_first(pid).and_then(|v| v.as_str()).unwrap_or("");
            writeln!(f, "{qid} Q0 {p} {} {score} tantivy", rank + 1)?;
        }
    }
    println!("{{\"build_s\": {build:.2}, \"index_bytes\": {size}, \"search_s\": {search:.2}, \"queries\": {}}}", qs.len());
    Ok(())
}
