{{ config(materialized='table') }}
select tier, count(*) as customers, sum(total) as revenue
from {{ ref('customer_totals') }}
group by tier
