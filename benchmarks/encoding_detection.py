"""How often legacy (non-UTF) files decode to exactly the right text.

Compares charset-normalizer's best match with ``ingest.decode_bytes`` (its tie-break rules) on
abstract-like sentences in 14 languages and 17 encodings, at three lengths: a short snippet
(a title), one sentence, and a file of a title and five paragraphs. Prints counts per length and
every case either method gets wrong.

    PYTHONPATH=$PWD python benchmarks/encoding_detection.py
"""

import charset_normalizer

from etl_project import ingest

SNIPPETS = [  # (language, encodings, text): a title-sized snippet
    ("en", ["cp1252"], "café “quoted”"),
    ("en", ["cp1252"], "Title — “A”"),
    ("fr", ["cp1252"], "Résumés d’été"),
    ("de", ["cp1252"], "Größere Übung"),
    ("ru", ["cp1251"], "Привет, мир"),
    ("ru", ["cp1251"], "Список статей"),
    ("el", ["cp1253"], "Λίστα άρθρων"),
    ("pl", ["cp1250"], "Łódź, źródło"),
    ("zh", ["gb18030"], "论文列表"),
    ("ja", ["shift_jis"], "論文リスト"),
]
SENTENCES = [
    ("en", ["cp1252"], "We study “robust” learning—a naïve approach fails on the café dataset’s 3–5% noise."),
    ("en", ["cp1252"], "Our method, called “FastPD”, improves accuracy by 12% — see Müller et al."),
    ("en", ["cp1252"], "Transformers “remember” less than we think: a study of Gödel-style prompts, Schrödinger’s cat and the naïve Bayes baseline — 7 datasets, 2–3× faster."),
    ("en", ["cp1252", "latin-1"], "Following Rényi and Gödel, we analyse random graphs; see also Pérez, Núñez and Çelik for the São Paulo traffic data."),
    ("en", ["cp1252"], "The “curse of dimensionality” isn’t what it seems…"),
    ("fr", ["cp1252"], "Nous proposons une méthode générale pour l’apprentissage à partir de données bruitées, et nous montrons qu’elle améliore les résultats."),
    ("fr", ["cp1252"], "Nous proposons une méthode générale pour l’apprentissage à partir de données bruitées."),
    ("fr", ["cp1252"], "Les réseaux de neurones profonds sont très efficaces, mais leur entraînement exige beaucoup de données étiquetées — ce qui coûte cher."),
    ("de", ["cp1252", "latin-1"], "Wir schlagen ein neues Verfahren für das Lernen aus verrauschten Daten vor und zeigen, dass es größere Modelle übertrifft."),
    ("de", ["cp1252"], "Große Sprachmodelle können „Halluzinationen“ erzeugen; wir schlagen eine Prüfung vor, die nachträglich Fehler erkennt und für Übersetzungen geeignet ist."),
    ("es", ["cp1252", "latin-1"], "Proponemos un método nuevo para el aprendizaje con datos ruidosos y demostramos que mejora la precisión en años de evaluación."),
    ("pt", ["cp1252", "latin-1"], "Propomos um método para aprendizagem com dados ruidosos e mostramos que ele melhora a precisão em situações difíceis."),
    ("it", ["cp1252"], "Proponiamo un metodo più efficiente per l’addestramento: la qualità è migliore e la velocità è maggiore del 30%."),
    ("sv", ["cp1252"], "Vi föreslår en ny metod för inlärning från brusiga data och visar att den förbättrar noggrannheten hos stora språkmodeller."),
    ("pl", ["cp1250", "iso8859-2"], "Proponujemy nową metodę uczenia się z zaszumionych danych i pokazujemy, że poprawia ona dokładność modeli językowych."),
    ("cs", ["cp1250"], "Navrhujeme novou metodu učení z dat se šumem a ukazujeme, že zlepšuje přesnost velkých jazykových modelů."),
    ("hu", ["cp1250"], "Új módszert javasolunk a zajos adatokból való tanuláshoz, és megmutatjuk, hogy javítja a nagy nyelvi modellek pontosságát."),
    ("tr", ["cp1254"], "Gürültülü verilerden öğrenme için yeni bir yöntem öneriyoruz ve büyük dil modellerinin doğruluğunu artırdığını gösteriyoruz."),
    ("ru", ["cp1251", "koi8-r"], "Мы предлагаем новый метод обучения на зашумлённых данных и показываем, что он повышает точность больших языковых моделей."),
    ("ru", ["cp1251", "koi8-r"], "Глубокие нейронные сети показывают высокую эффективность, однако их обучение требует большого количества размеченных данных."),
    ("uk", ["cp1251"], "Ми пропонуємо новий метод навчання на зашумлених даних і показуємо, що він підвищує точність великих мовних моделей."),
    ("el", ["cp1253"], "Προτείνουμε μια νέα μέθοδο μάθησης από δεδομένα με θόρυβο και δείχνουμε ότι βελτιώνει την ακρίβεια των μοντέλων."),
    ("zh", ["gb18030"], "我们提出了一种从含噪声数据中学习的新方法，并证明它能提高大型语言模型的准确性。"),
    ("zh", ["gb18030"], "深度神经网络表现出很高的效率，但其训练需要大量的标注数据，这使得成本很高。我们提出一种半监督方法。"),
    ("zh-tw", ["big5"], "深度神經網路表現出很高的效率，但其訓練需要大量的標註資料，這使得成本很高。我們提出一種半監督方法。"),
    ("ja", ["shift_jis", "euc-jp"], "本研究では、ノイズを含むデータから学習する新しい手法を提案し、大規模言語モデルの精度が向上することを示す。"),
    ("ko", ["euc-kr"], "우리는 잡음이 있는 데이터로부터 학습하는 새로운 방법을 제안하고 대규모 언어 모델의 정확도를 향상시킴을 보인다."),
]


def cases():
    for lang, codecs, text in SNIPPETS:
        for codec in codecs:
            yield "snippet", lang, codec, text
    for lang, codecs, text in SENTENCES:
        for codec in codecs:
            yield "sentence", lang, codec, text
            yield "file", lang, codec, "Paper list\n\n" + "\n\n".join([text] * 5) + "\n"


def detector_alone(data: bytes) -> tuple[str | None, str]:
    best = charset_normalizer.from_bytes(data).best()
    return (None, "-") if best is None else (str(best), best.encoding)


def with_rules(data: bytes) -> tuple[str | None, str]:
    try:
        decoded = ingest.decode_bytes(data)
    except ValueError:
        return None, "-"
    return decoded.text, f"{decoded.encoding} ({decoded.confidence})"


def main() -> None:
    methods = {"charset-normalizer best": detector_alone, "ingest.decode_bytes": with_rules}
    totals: dict[tuple[str, str], list[int]] = {}
    wrong = []
    for kind, lang, codec, text in cases():
        data = text.encode(codec)
        for method, decode in methods.items():
            got, label = decode(data)
            tally = totals.setdefault((kind, method), [0, 0])
            tally[1] += 1
            if got == text:
                tally[0] += 1
            else:
                wrong.append((method, kind, lang, codec, label, (got or "")[:40].replace("\n", " ")))
    print(f"{'length':<10}" + "".join(f"{m:>26}" for m in methods))
    for kind in ("snippet", "sentence", "file"):
        cells = [f"{totals[kind, m][0]}/{totals[kind, m][1]}" for m in methods]
        print(f"{kind:<10}" + "".join(f"{c:>26}" for c in cells))
    print("\nwrong text (method, length, language, true encoding -> read as, text read):")
    for row in wrong:
        print("  " + " | ".join(row))


if __name__ == "__main__":
    main()
