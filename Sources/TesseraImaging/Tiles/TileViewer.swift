import Foundation

/// A self-contained Deep Zoom viewer page: one HTML file with its own small pan/zoom
/// script (no library, no network fetch besides the pyramid's own tiles, by relative path).
enum TileViewer {
    static func page(title: String, filesURL: String, width: Int, height: Int, tileSize: Int, overlap: Int,
                     maxLevel: Int, suffix: String) -> String {
        let safeTitle = title.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
        // A relative URL (file names may hold '#', '?', '%' or spaces), then a JS string.
        let encoded = filesURL.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "?#%;"))) ?? filesURL
        let files = encoded.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "<", with: "\\u003c")
        return """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(safeTitle) — Tessera pyramid</title>
            <style>
              html, body { margin: 0; height: 100%; background: #1b1b1b; color: #ddd; font: 13px system-ui, sans-serif; }
              #view { position: absolute; inset: 0; overflow: hidden; cursor: grab; touch-action: none; }
              #view.dragging { cursor: grabbing; }
              #view img { position: absolute; user-select: none; -webkit-user-drag: none; image-rendering: auto; }
              #bar { position: absolute; left: 8px; top: 8px; background: rgba(0,0,0,.6); padding: 4px 8px; border-radius: 4px; }
              #bar button { font: inherit; margin-left: 4px; }
            </style>
            </head>
            <body>
            <div id="view"></div>
            <div id="bar">\(safeTitle) · \(width)×\(height) · <span id="zoom"></span>
              <button id="in" title="zoom in (+)">+</button><button id="out" title="zoom out (−)">−</button><button id="fit" title="fit (0)">fit</button></div>
            <script>
            "use strict";
            const P = { files: "\(files)", width: \(width), height: \(height), tile: \(tileSize), overlap: \(overlap), maxLevel: \(maxLevel), suffix: "\(suffix)" };
            const view = document.getElementById("view");
            let scale = 1, ox = 0, oy = 0;           // screen = image * scale + offset
            const layers = new Map();                // "level/col_row" -> img
            function fit() {
              const r = view.getBoundingClientRect();
              scale = Math.min(r.width / P.width, r.height / P.height);
              ox = (r.width - P.width * scale) / 2; oy = (r.height - P.height * scale) / 2;
              draw();
            }
            function levelFor(s) {                   // the level whose pixels are at least screen size
              const shrink = Math.max(0, Math.floor(Math.log2(1 / Math.max(s * devicePixelRatio, 1e-9))));
              return Math.max(0, P.maxLevel - shrink);
            }
            function draw() {
              const r = view.getBoundingClientRect();
              const level = levelFor(scale), k = P.maxLevel - level, f = Math.pow(2, k);
              const lw = Math.ceil(P.width / f), lh = Math.ceil(P.height / f);
              const cols = Math.ceil(lw / P.tile), rows = Math.ceil(lh / P.tile);
              const x0 = Math.max(0, Math.floor((-ox / scale) / f / P.tile)), y0 = Math.max(0, Math.floor((-oy / scale) / f / P.tile));
              const x1 = Math.min(cols - 1, Math.floor(((r.width - ox) / scale) / f / P.tile));
              const y1 = Math.min(rows - 1, Math.floor(((r.height - oy) / scale) / f / P.tile));
              const keep = new Set();
              for (let row = y0; row <= y1; row++) for (let col = x0; col <= x1; col++) {
                const key = level + "/" + col + "_" + row;
                keep.add(key);
                let img = layers.get(key);
                if (!img) {
                  img = new Image();
                  img.src = P.files + key + "." + P.suffix;
                  img.draggable = false;
                  view.appendChild(img);
                  layers.set(key, img);
                }
                const tx = col * P.tile - (col > 0 ? P.overlap : 0), ty = row * P.tile - (row > 0 ? P.overlap : 0);
                const tw = Math.min(lw, (col + 1) * P.tile + P.overlap) - tx, th = Math.min(lh, (row + 1) * P.tile + P.overlap) - ty;
                img.style.left = (ox + tx * f * scale) + "px"; img.style.top = (oy + ty * f * scale) + "px";
                img.style.width = (tw * f * scale) + "px"; img.style.height = (th * f * scale) + "px";
              }
              for (const [key, img] of layers) if (!keep.has(key)) { img.remove(); layers.delete(key); }
              document.getElementById("zoom").textContent = (scale * 100).toFixed(scale < 0.1 ? 2 : 0) + "% · level " + level;
            }
            function zoomAt(factor, cx, cy) {
              const s = Math.min(8, Math.max(1e-4, scale * factor));
              ox = cx - (cx - ox) * (s / scale); oy = cy - (cy - oy) * (s / scale); scale = s;
              draw();
            }
            function centre() { const r = view.getBoundingClientRect(); return [r.width / 2, r.height / 2]; }
            view.addEventListener("wheel", e => { e.preventDefault(); zoomAt(Math.exp(-e.deltaY * 0.0015), e.clientX, e.clientY); }, { passive: false });
            view.addEventListener("dblclick", e => zoomAt(2, e.clientX, e.clientY));
            let drag = null;
            view.addEventListener("pointerdown", e => { drag = [e.clientX, e.clientY]; view.setPointerCapture(e.pointerId); view.classList.add("dragging"); });
            view.addEventListener("pointermove", e => { if (!drag) return; ox += e.clientX - drag[0]; oy += e.clientY - drag[1]; drag = [e.clientX, e.clientY]; draw(); });
            view.addEventListener("pointerup", () => { drag = null; view.classList.remove("dragging"); });
            document.getElementById("in").onclick = () => zoomAt(2, ...centre());
            document.getElementById("out").onclick = () => zoomAt(0.5, ...centre());
            document.getElementById("fit").onclick = fit;
            addEventListener("keydown", e => { if (e.key === "+" || e.key === "=") zoomAt(2, ...centre()); else if (e.key === "-") zoomAt(0.5, ...centre()); else if (e.key === "0") fit(); });
            addEventListener("resize", draw);
            fit();
            </script>
            </body>
            </html>

            """
    }
}
